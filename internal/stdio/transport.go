// Package stdio is bee's MCP transport over newline-delimited JSON-RPC on
// stdin/stdout: a bad line is answered and the session carries on, and a
// request the client cancelled gets no response.
//
// It replaces the go-sdk's stock [mcp.StdioTransport], which ends the whole
// session (dropping everything in flight, silently) on the first line it
// cannot decode, and which answers cancelled requests.
//
// A [Transport]'s connection promises:
//
//   - Out carries JSON-RPC 2.0 messages and nothing else: one message per
//     line, each line written by a single Out.Write call, never interleaved
//     with another.
//   - When In ends, the requests in flight are answered before Read reports
//     it: the go-sdk stops writing answers as soon as Read returns an error,
//     so Read holds EOF back until every request read has its response
//     written (or withheld). A script that writes its requests and closes
//     stdin gets every answer that comes within 250 ms; a request still
//     running then (a long wait) is cancelled as if the client had sent
//     notifications/cancelled (its answer is withheld and goes to
//     OnDropped), and the whole end is bounded by [Transport.DrainTimeout].
//   - A line that cannot be used is answered with a JSON-RPC error and reading
//     carries on. Not JSON (or not UTF-8): -32700. A batch, JSON that is not
//     a JSON-RPC 2.0 message, a line longer than MaxLineBytes, or a request
//     whose id is already in flight: -32600. The reply carries the request's
//     id when it could be recovered and is unambiguous, else null; for a line
//     over the limit, the id is recovered from the part that was read when
//     that part shows one top-level "id" (a string or an integer) beside a
//     "method" and no "result" or "error". Nothing a line contains ends the
//     session; only an error or EOF from In, or Close, does.
//   - A request cancelled by notifications/cancelled gets no response: the
//     server's response is withheld and handed to [Transport.OnDropped]. So
//     is a response that never reached Out: Out failed, or the connection
//     was closed before the response came.
//     A cancel that crosses its response on the wire (it arrives within
//     [Transport.LateCancelWindow], 1 s by default, after the response was
//     written) means the client discards that response, so it is handed to
//     OnDropped too.
//   - A notifications/progress is written only while the request that carried
//     its progress token is live (read, not cancelled, not yet answered).
//     Progress after the response, after a cancel, or for a token no live
//     request carries is dropped.
//
// It does not support JSON-RPC batches, never replies to a JSON-RPC response
// (a valid error response with a null id is logged and dropped), never closes
// Out, and understands no MCP method other than notifications/cancelled,
// notifications/progress and the _meta.progressToken of requests. It logs to
// its Logger only, never to Out, and never logs a whole line.
//
// # Stdin and Close
//
// One goroutine per connection reads In. It ends when In returns an error or
// EOF, or soon after Close when In stops blocking. Close closes In if In is
// an [io.Closer] so that a blocked read returns; an [*os.File] in blocking
// mode may not be interrupted that way, and then the goroutine lingers until
// the read returns.
package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/internal/logkey"
)

// DefaultMaxLineBytes is the longest line a connection reads when
// [Transport.MaxLineBytes] is zero. Longer lines are answered with -32600 and
// discarded without being held in memory.
const DefaultMaxLineBytes = 4 << 20

// ErrAlreadyConnected is returned by [Transport.Connect] when it is called a
// second time: a Transport serves exactly one connection.
var ErrAlreadyConnected = errors.New("stdio: transport already connected")

// JSON-RPC and MCP method names the connection looks at.
const (
	methodCancelled = "notifications/cancelled"
	methodProgress  = "notifications/progress"
)

// A Transport is an mcp.Transport over a line reader and writer.
//
// Set its fields before calling Connect and do not change them afterwards. A
// Transport must not be copied after first use.
type Transport struct {
	// In is read line by line: stdin. If it is an io.Closer, the connection's
	// Close closes it so that a blocked read ends.
	In io.Reader
	// Out is written line by line: stdout. Only JSON-RPC lines are ever
	// written here, each by a single Write call. The connection never closes
	// it.
	Out io.Writer
	// MaxLineBytes is the longest line read, not counting its "\n". Zero means
	// DefaultMaxLineBytes; negative is an error from Connect.
	MaxLineBytes int
	// Logger receives warnings about rejected lines and debug records about
	// withheld messages. Nil means discard.
	Logger *slog.Logger
	// OnDropped, if set, is called (outside locks) with the id and result of
	// each response that did not reach the client: withheld because its
	// request was cancelled, not written because Out failed, or written
	// after Close. The caller can then undo what that response carried (bee
	// releases a claim nobody received). result is nil if the response was
	// an error. It runs on the goroutine whose Write dropped the response,
	// before that Write returns, or on the reading goroutine: it must not
	// block, or every line after it waits (hand slow work to a goroutine of
	// your own, as bee's session does).
	OnDropped func(id jsonrpc.ID, result json.RawMessage)
	// DrainTimeout bounds how long Read holds back the end of In while
	// requests are still in flight, so that their answers are written (those
	// still running after 250 ms are cancelled first). Zero means
	// DefaultDrainTimeout; negative means no wait.
	DrainTimeout time.Duration
	// LateCancelWindow is how long after a response is written a
	// notifications/cancelled for its request still counts: the client
	// cancelled before it read the response and discards it (Claude Code
	// logs an unknown id), so OnDropped is called for it too, on the reading
	// goroutine. Zero means DefaultLateCancelWindow; negative turns it off.
	// Keep it short: a client that sends a cancel for a call it has already
	// read (Claude Code 2.1.328 does not; some SDK versions may) would
	// otherwise lose what it read.
	LateCancelWindow time.Duration

	connected atomic.Bool
}

// DefaultLateCancelWindow is the LateCancelWindow used when it is zero: on
// a local pipe a response and a cancel cross within milliseconds.
const DefaultLateCancelWindow = time.Second

// DefaultDrainTimeout is the DrainTimeout used when it is zero: room for
// cancelled requests to answer after the 250 ms grace.
const DefaultDrainTimeout = time.Second

// maxRecent bounds the written responses kept for a late cancel.
const maxRecent = 8

var _ mcp.Transport = (*Transport)(nil)

// Connect starts reading In and returns the connection. It may be called
// once; a second call returns [ErrAlreadyConnected]. ctx is not used beyond
// the call: the connection lives until Close, or until In ends.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stdio: connect: %w", err)
	}
	if t.In == nil || t.Out == nil {
		return nil, errors.New("stdio: connect: Transport.In and Transport.Out must both be set")
	}
	maxLine := t.MaxLineBytes
	switch {
	case maxLine < 0:
		return nil, fmt.Errorf("stdio: connect: MaxLineBytes is negative (%d)", maxLine)
	case maxLine == 0:
		maxLine = DefaultMaxLineBytes
	}
	if !t.connected.CompareAndSwap(false, true) {
		return nil, ErrAlreadyConnected
	}
	logger := t.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	window := t.LateCancelWindow
	if window == 0 {
		window = DefaultLateCancelWindow
	}
	drain := t.DrainTimeout
	if drain == 0 {
		drain = DefaultDrainTimeout
	}
	items := make(chan item)
	c := &conn{
		in:         t.In,
		out:        t.Out,
		maxLine:    maxLine,
		logger:     logger,
		onDropped:  t.OnDropped,
		lateWindow: window,
		drainFor:   drain,
		answered:   make(chan struct{}, 1),
		items:      items,
		readDone:   make(chan struct{}),
		closed:     make(chan struct{}),
		inFlight:   make(map[jsonrpc.ID]*call),
		liveTokens: make(map[string]int),
	}
	go c.readLoop(items)
	return c, nil
}

// A conn is the mcp.Connection made by Transport.Connect.
type conn struct {
	// Fixed at creation.
	in         io.Reader
	out        io.Writer
	maxLine    int
	logger     *slog.Logger
	onDropped  func(jsonrpc.ID, json.RawMessage)
	lateWindow time.Duration // negative: late cancels are ignored
	drainFor   time.Duration // negative: EOF is reported at once

	// answered gets a token (never blocking) each time a request leaves
	// inFlight, so that a Read holding back EOF looks again.
	answered chan struct{}
	// The end of In, as Read works through it (Read is never called
	// concurrently): eofStage says how far it got, eofCancels holds the
	// cancellations still to hand to the server, eofBy bounds the whole.
	eofStage   int
	eofCancels []jsonrpc.ID
	eofBy      time.Time

	// items carries each non-empty line, classified, from readLoop to Read.
	items <-chan item
	// readDone is closed when readLoop returns, after it has set readErr.
	readDone chan struct{}
	readErr  error

	closeOnce sync.Once
	closed    chan struct{} // closed by the first Close
	closeErr  error

	// writeMu guards writes to out, so that each line is one uninterrupted
	// Write. It is held while deciding whether a message is written at all,
	// so that the decision and the bytes on the wire happen in the same
	// order (a progress notification checked before its request's response
	// is also written before it). Lock order: writeMu, then mu.
	writeMu sync.Mutex

	mu sync.Mutex // guards inFlight and liveTokens
	// inFlight holds every request read and not yet answered (nor withheld).
	inFlight map[jsonrpc.ID]*call
	// liveTokens counts, per progress token key, the in-flight requests that
	// carry that token and are not cancelled.
	liveTokens map[string]int
	// recent holds the last successful responses written (at most
	// maxRecent, oldest first), for a cancel that crosses one on the wire.
	recent []written
}

// A written is a response on the wire, kept for a late cancel.
type written struct {
	id     jsonrpc.ID
	result json.RawMessage
	at     time.Time
}

// A call is a request from the client that has been read and not answered.
type call struct {
	token     string // progress token key; "" if the request had none
	cancelled bool   // notifications/cancelled named it
}

var _ mcp.Connection = (*conn)(nil)

// SessionID returns "": a stdio connection has no session id.
func (c *conn) SessionID() string { return "" }

// Read returns the next message from In. Lines that cannot be used are
// answered on Out (under the write lock) and skipped; so is a request whose
// id is already in flight. Read returns io.EOF after Close or at the end of
// In, ctx's error if ctx is done first (the pending message is kept for the
// next Read), and a wrapped error if In fails or an error reply cannot be
// written.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if c.isClosed() {
			return nil, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		select {
		case <-c.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.readDone:
			if c.isClosed() {
				return nil, io.EOF
			}
			// Every line has been taken from items by now (readLoop hands
			// them over before it closes readDone).
			if msg := c.endOfInput(ctx); msg != nil {
				return msg, nil
			}
			if c.isClosed() {
				return nil, io.EOF
			}
			return nil, c.readErr
		case it := <-c.items:
			msg, err := c.accept(it)
			if err != nil {
				if c.isClosed() {
					return nil, io.EOF
				}
				return nil, err
			}
			if msg != nil {
				return msg, nil
			}
		}
	}
}

// drainGrace is how long, at the end of In, requests in flight may run on
// before they are cancelled: quick answers (initialize, tools/list, a board
// write) come well within it; a long wait, or the subscriptions/listen
// Claude Code keeps open, would otherwise hold the end up for DrainTimeout.
const drainGrace = 250 * time.Millisecond

// endOfInput works through the end of In, one Read at a time. It waits up
// to drainGrace for the requests in flight to be answered; then it hands
// the server a notifications/cancelled for each one still running (one per
// call: the server cancels it, its answer is withheld and goes to
// OnDropped), and waits for those answers too, everything within
// drainFor. It returns nil once Read should report the end of In.
func (c *conn) endOfInput(ctx context.Context) jsonrpc.Message {
	for {
		switch c.eofStage {
		case 0:
			if c.drainFor < 0 {
				c.eofStage = 3
				return nil
			}
			c.eofBy = time.Now().Add(c.drainFor)
			c.eofStage = 1
			if c.awaitAnswers(ctx, time.Now().Add(min(drainGrace, c.drainFor))) || c.isClosed() || ctx.Err() != nil {
				c.eofStage = 3
				return nil
			}
			c.mu.Lock()
			for id, cl := range c.inFlight {
				if !cl.cancelled {
					c.eofCancels = append(c.eofCancels, id)
				}
			}
			c.mu.Unlock()
			if len(c.eofCancels) > 0 {
				c.logger.Info("stdin closed: cancelling requests still in flight", logkey.Pending, len(c.eofCancels))
			}
			c.eofStage = 2
		case 2:
			for len(c.eofCancels) > 0 {
				id := c.eofCancels[0]
				c.eofCancels = c.eofCancels[1:]
				if !c.cancelInFlight(id) {
					continue // answered meanwhile: delivered, not to be undone
				}
				params, _ := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": "stdin closed"})
				return &jsonrpc.Request{Method: methodCancelled, Params: params}
			}
			if !c.awaitAnswers(ctx, c.eofBy) {
				c.mu.Lock()
				n := len(c.inFlight)
				c.mu.Unlock()
				c.logger.Warn("stdin closed with requests unanswered", logkey.Pending, n, logkey.Limit, c.drainFor)
			}
			c.eofStage = 3
		default:
			return nil
		}
	}
}

// awaitAnswers waits until no request is in flight, or until by, Close or
// ctx ending, and reports whether none is.
func (c *conn) awaitAnswers(ctx context.Context, by time.Time) bool {
	timer := time.NewTimer(time.Until(by))
	defer timer.Stop()
	for {
		c.mu.Lock()
		n := len(c.inFlight)
		c.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-c.answered:
		case <-timer.C:
			return false
		case <-c.closed:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// noteAnswered wakes a Read that waits for answers at the end of In.
func (c *conn) noteAnswered() {
	select {
	case c.answered <- struct{}{}:
	default:
	}
}

// accept applies a line read by readLoop to the connection's state. It
// returns the message to hand to the server, or nil (and writes the error
// reply) if the line is rejected.
func (c *conn) accept(it item) (jsonrpc.Message, error) {
	if it.reject != nil {
		if it.salvaged != nil {
			// A reply naming an id in flight would read as that request's
			// answer.
			c.mu.Lock()
			_, busy := c.inFlight[*it.salvaged]
			c.mu.Unlock()
			if busy {
				it.reject.id = nil
			}
		}
		return nil, c.rejectLine(it.reject)
	}
	switch msg := it.msg.(type) {
	case *jsonrpc.Request:
		if msg.IsCall() {
			c.mu.Lock()
			_, dup := c.inFlight[msg.ID]
			if !dup {
				c.forgetRecentLocked(msg.ID)
				c.inFlight[msg.ID] = &call{token: it.token}
				if it.token != "" {
					c.liveTokens[it.token]++
				}
			}
			c.mu.Unlock()
			if dup {
				return nil, c.rejectLine(&rejection{
					code:    jsonrpc.CodeInvalidRequest,
					message: fmt.Sprintf("invalid request: request id %s is already in flight", idText(msg.ID)),
					log:     "stdin request id already in flight",
					attrs:   []any{logkey.RequestID, msg.ID.Raw(), logkey.Method, msg.Method},
				})
			}
			return msg, nil
		}
		if it.cancels {
			c.markCancelled(it.cancelID)
		}
		return msg, nil
	default:
		// A response to a request the server sent: pass it through unchanged.
		return it.msg, nil
	}
}

// markCancelled records that the client cancelled the in-flight request id,
// so that its response is withheld and its progress dropped. A cancel for a
// response written within the late-cancel window means the client will
// discard that response: OnDropped is called for it. Any other id is
// ignored.
func (c *conn) markCancelled(id jsonrpc.ID) {
	c.mu.Lock()
	cl, ok := c.inFlight[id]
	if ok && !cl.cancelled {
		cl.cancelled = true
		c.releaseTokenLocked(cl.token)
	}
	var late *written
	if !ok {
		late = c.takeRecentLocked(id)
	}
	c.mu.Unlock()
	if ok {
		c.logger.Debug("request cancelled by client", logkey.RequestID, id.Raw())
	}
	if late != nil {
		c.logger.Debug("request cancelled after its response was written; the client discards it", logkey.RequestID, id.Raw())
		if c.onDropped != nil {
			c.onDropped(late.id, late.result)
		}
	}
}

// cancelInFlight marks the request id cancelled if it is still in flight,
// and reports whether it was.
func (c *conn) cancelInFlight(id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.inFlight[id]
	if !ok || cl.cancelled {
		return false
	}
	cl.cancelled = true
	c.releaseTokenLocked(cl.token)
	return true
}

// rememberLocked keeps a written response for a late cancel. c.mu must be
// held.
func (c *conn) rememberLocked(id jsonrpc.ID, result json.RawMessage) {
	if c.lateWindow < 0 || c.onDropped == nil {
		return
	}
	now := time.Now()
	// Drop what is past the window, and the oldest beyond maxRecent.
	keep := c.recent[:0]
	for _, w := range c.recent {
		if now.Sub(w.at) <= c.lateWindow {
			keep = append(keep, w)
		}
	}
	c.recent = keep
	if len(c.recent) == maxRecent {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, written{id: id, result: result, at: now})
}

// takeRecentLocked removes and returns the response written for id within
// the window, or nil. c.mu must be held.
func (c *conn) takeRecentLocked(id jsonrpc.ID) *written {
	for i, w := range c.recent {
		if w.id == id {
			c.recent = append(c.recent[:i], c.recent[i+1:]...)
			if time.Since(w.at) > c.lateWindow {
				return nil
			}
			return &w
		}
	}
	return nil
}

// forgetRecentLocked drops a kept response whose id the client reuses: a
// cancel naming the id now means the new request. c.mu must be held.
func (c *conn) forgetRecentLocked(id jsonrpc.ID) {
	for i, w := range c.recent {
		if w.id == id {
			c.recent = append(c.recent[:i], c.recent[i+1:]...)
			return
		}
	}
}

// releaseTokenLocked ends one live request's use of token. c.mu must be held.
func (c *conn) releaseTokenLocked(token string) {
	if token == "" {
		return
	}
	if n := c.liveTokens[token]; n > 1 {
		c.liveTokens[token] = n - 1
	} else {
		delete(c.liveTokens, token)
	}
}

// rejectLine logs a rejected line at warn and writes its error reply.
func (c *conn) rejectLine(r *rejection) error {
	if r.silent {
		c.logger.Warn(r.log, r.attrs...)
		return nil
	}
	c.logger.Warn(r.log, append(r.attrs, logkey.Reason, r.message)...)
	if err := c.writeLine(r.reply()); err != nil {
		return fmt.Errorf("stdio: writing error reply: %w", err)
	}
	return nil
}

// writeLine writes one complete line to Out under the write lock.
func (c *conn) writeLine(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.isClosed() {
		return mcp.ErrConnectionClosed
	}
	if _, err := c.out.Write(line); err != nil {
		return fmt.Errorf("writing stdout: %w", err)
	}
	return nil
}

// Write writes msg to Out as one line, in a single Out.Write call. It may be
// called concurrently.
//
// A response to a cancelled request is not written: Write returns nil and
// calls OnDropped. A notifications/progress whose token belongs to no live
// request is not written either (Write returns nil). A response that Out
// fails to take is handed to OnDropped, and Write returns Out's error,
// wrapped. After Close, Write returns an error wrapping
// [mcp.ErrConnectionClosed] and writes nothing; a response to a request
// still in flight then goes to OnDropped.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if c.isClosed() {
		c.dropUnwritten(msg)
		return fmt.Errorf("stdio: write: %w", mcp.ErrConnectionClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("stdio: encoding message: %w", err)
	}
	data = append(data, '\n')

	var progressToken string
	isProgress := false
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && req.Method == methodProgress {
		isProgress = true
		progressToken = progressTokenKey(req.Params, false)
	}

	c.writeMu.Lock()
	if c.isClosed() {
		c.writeMu.Unlock()
		c.dropUnwritten(msg)
		return fmt.Errorf("stdio: write: %w", mcp.ErrConnectionClosed)
	}
	var withheld, answer *jsonrpc.Response
	c.mu.Lock()
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if cl, ok := c.inFlight[m.ID]; ok {
			// Forget the request before its response is on the wire: the
			// client may reuse the id as soon as it has read the response.
			delete(c.inFlight, m.ID)
			answer = m
			if cl.cancelled {
				withheld = m
			} else {
				c.releaseTokenLocked(cl.token)
				if m.Error == nil {
					c.rememberLocked(m.ID, m.Result)
				}
			}
		}
	case *jsonrpc.Request:
		if isProgress && (progressToken == "" || c.liveTokens[progressToken] == 0) {
			c.mu.Unlock()
			c.writeMu.Unlock()
			c.logger.Debug("progress dropped: its request is not live", logkey.ProgressToken, progressToken)
			return nil
		}
	}
	c.mu.Unlock()
	if answer != nil {
		defer c.noteAnswered()
	}
	if withheld != nil {
		c.writeMu.Unlock()
		c.logger.Debug("response withheld: request was cancelled", logkey.RequestID, withheld.ID.Raw())
		c.dropped(withheld)
		return nil
	}
	_, err = c.out.Write(data)
	if err != nil && answer != nil {
		// Not delivered: a late cancel must not hand it over a second time.
		c.mu.Lock()
		c.forgetRecentLocked(answer.ID)
		c.mu.Unlock()
	}
	c.writeMu.Unlock()
	if err != nil {
		if answer != nil {
			c.logger.Warn("response not written: stdout failed", logkey.RequestID, answer.ID.Raw(), logkey.Err, err)
			c.dropped(answer)
		}
		return fmt.Errorf("stdio: writing stdout: %w", err)
	}
	return nil
}

// dropUnwritten hands a response that Write will not write, because the
// connection is closed, to OnDropped if its request is still in flight.
func (c *conn) dropUnwritten(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	c.mu.Lock()
	_, live := c.inFlight[resp.ID]
	delete(c.inFlight, resp.ID)
	c.mu.Unlock()
	if !live {
		return
	}
	c.noteAnswered()
	c.logger.Warn("response not written: connection closed", logkey.RequestID, resp.ID.Raw())
	c.dropped(resp)
}

// dropped hands a response that did not reach the client to OnDropped.
func (c *conn) dropped(resp *jsonrpc.Response) {
	if c.onDropped == nil {
		return
	}
	var result json.RawMessage
	if resp.Error == nil {
		result = resp.Result
	}
	c.onDropped(resp.ID, result)
}

// Close closes the connection: a pending Read returns io.EOF, later Reads
// return io.EOF and later Writes fail. It closes In if In is an io.Closer
// and returns that error, wrapped. Close may be called more than once and
// concurrently; calls after the first return nil. It does not wait for the
// reading goroutine, which ends once In's read returns.
func (c *conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		if cl, ok := c.in.(io.Closer); ok {
			if err := cl.Close(); err != nil {
				c.closeErr = fmt.Errorf("stdio: closing stdin: %w", err)
			}
		}
	})
	if !first {
		return nil
	}
	return c.closeErr
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
