package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/stdio"
	"github.com/tractat-us/bee/internal/testtime"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	testtime.VerifyTestMain(m)
}

// waitTimeout bounds every wait in these tests; nothing should come close.
var waitTimeout = testtime.Bound(5 * time.Second)

// An outRecorder is the Out of a connection under test. It checks that each
// Write call is exactly one valid JSON-RPC line and that no two Write calls
// overlap, records every line, and hands each line to lines.
type outRecorder struct {
	active atomic.Int32
	lines  chan string

	mu       sync.Mutex
	all      []string
	problems []string
}

func newOutRecorder() *outRecorder {
	return &outRecorder{lines: make(chan string, 8192)}
}

func (r *outRecorder) Write(p []byte) (int, error) {
	if r.active.Add(1) != 1 {
		r.problem("overlapping Out.Write calls")
	}
	runtime.Gosched() // widen the window an unlocked writer would overlap in
	defer r.active.Add(-1)

	s := string(p)
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		r.problem(fmt.Sprintf("Out.Write is not exactly one line: %.80q", s))
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		if err := checkJSONRPCLine([]byte(line)); err != nil {
			r.problem(fmt.Sprintf("not a JSON-RPC line (%v): %.80q", err, line))
		}
		r.mu.Lock()
		r.all = append(r.all, line)
		r.mu.Unlock()
		select {
		case r.lines <- line:
		default:
			r.problem("line channel full")
		}
	}
	return len(p), nil
}

// problem records a broken rule; the first few are enough to report.
func (r *outRecorder) problem(p string) {
	r.mu.Lock()
	if len(r.problems) < 5 {
		r.problems = append(r.problems, p)
	}
	r.mu.Unlock()
}

// written returns every line written so far.
func (r *outRecorder) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.all...)
}

// requireClean fails t if any Write broke the one-line-of-JSON-RPC rule.
func (r *outRecorder) requireClean(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.problems, "Out received something other than whole JSON-RPC lines")
}

// next returns the next line written to Out, decoded.
func (r *outRecorder) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case line := <-r.lines:
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "line %q", line)
		return m
	case <-time.After(waitTimeout):
		require.FailNow(t, "no line written to Out")
		return nil
	}
}

// requireNone fails t if a line has been written to Out and not yet taken.
func (r *outRecorder) requireNone(t *testing.T) {
	t.Helper()
	select {
	case line := <-r.lines:
		require.FailNow(t, "unexpected line on Out", "%s", line)
	default:
	}
}

// waitFor returns the first line written to Out (from now on) for which
// match is true, skipping others.
func (r *outRecorder) waitFor(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case line := <-r.lines:
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if match(m) {
				return m
			}
		case <-deadline:
			require.FailNow(t, "timed out waiting for "+what)
			return nil
		}
	}
}

// isResponse matches a response with the given id (as decoded from JSON:
// float64 or string).
func isResponse(id any) func(map[string]any) bool {
	return func(m map[string]any) bool {
		_, isReq := m["method"]
		return !isReq && m["id"] == id
	}
}

// checkJSONRPCLine returns an error unless line is exactly one JSON-RPC 2.0
// object: a request/notification, or a response with exactly one of result
// and error.
func checkJSONRPCLine(line []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errors.New(`"jsonrpc" is not "2.0"`)
	}
	id, hasID := m["id"]
	if hasID && !isStringOrInt(id) && string(id) != "null" {
		return fmt.Errorf("bad id %s", id)
	}
	if method, ok := m["method"]; ok {
		if method[0] != '"' {
			return errors.New("method is not a string")
		}
		if _, ok := m["result"]; ok {
			return errors.New("request with result")
		}
		if _, ok := m["error"]; ok {
			return errors.New("request with error")
		}
		if p, ok := m["params"]; ok && p[0] != '{' && p[0] != '[' {
			return errors.New("params neither object nor array")
		}
		if hasID && string(id) == "null" {
			return errors.New("request with null id")
		}
		return nil
	}
	result, hasResult := m["result"]
	errObj, hasError := m["error"]
	switch {
	case !hasID:
		return errors.New("response without id")
	case hasResult == hasError:
		return errors.New("response needs exactly one of result and error")
	case hasResult && string(id) == "null":
		return errors.New("result with null id")
	case hasResult:
		if len(result) == 0 {
			return errors.New("empty result")
		}
		return nil
	}
	var e struct {
		Code    *int64  `json:"code"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(errObj, &e); err != nil || e.Code == nil || e.Message == nil {
		return fmt.Errorf("bad error object %s", errObj)
	}
	return nil
}

func isStringOrInt(raw json.RawMessage) bool {
	if raw[0] == '"' {
		return true
	}
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// A logRecord is one record captured by logRecorder.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// A logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, rec)
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) all() []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logRecord(nil), l.records...)
}

// A dropped is one call of Transport.OnDropped.
type dropped struct {
	id     jsonrpc.ID
	result json.RawMessage
}

// A rig is the far end of a Transport under test: In is an io.Pipe fed, in
// order, by one goroutine from the lines sent with send; Out is an
// outRecorder.
type rig struct {
	t       *testing.T
	in      chan string
	inOnce  sync.Once
	inR     *io.PipeReader
	written chan struct{} // closed when the feeding goroutine has returned
	out     *outRecorder
	logs    *logRecorder
	dropped chan dropped
}

// newRig starts a rig. Its cleanup, which runs after any registered later,
// stops the feeding goroutine, checks Out and checks for leaked goroutines.
func newRig(t *testing.T) *rig {
	t.Helper()
	return startRig(t, true)
}

// newBubbleRig starts a rig inside a synctest bubble, whose own end checks
// that every goroutine started in it has ended (goleak would count the
// bubble's test goroutine as a leak).
func newBubbleRig(t *testing.T) *rig {
	t.Helper()
	return startRig(t, false)
}

func startRig(t *testing.T, checkLeaks bool) *rig {
	t.Helper()
	inR, inW := io.Pipe()
	r := &rig{
		t:       t,
		in:      make(chan string, 1024),
		inR:     inR,
		written: make(chan struct{}),
		out:     newOutRecorder(),
		logs:    &logRecorder{},
		dropped: make(chan dropped, 64),
	}
	go func() {
		defer close(r.written)
		defer inW.Close()
		for s := range r.in {
			if _, err := io.WriteString(inW, s); err != nil {
				return // the connection closed In
			}
		}
	}()
	t.Cleanup(func() {
		r.closeIn()
		_ = inR.Close() // unblock the feeder if nothing reads In any more
		<-r.written
		r.out.requireClean(t)
		if checkLeaks {
			testtime.VerifyNoLeaks(t)
		}
	})
	return r
}

// transport returns a Transport over the rig.
func (r *rig) transport(maxLine int) *stdio.Transport {
	return &stdio.Transport{
		In:           r.inR,
		Out:          r.out,
		MaxLineBytes: maxLine,
		Logger:       slog.New(r.logs),
		OnDropped: func(id jsonrpc.ID, result json.RawMessage) {
			r.dropped <- dropped{id: id, result: result}
		},
	}
}

// send queues lines (each gets a "\n") for In.
func (r *rig) send(lines ...string) {
	for _, l := range lines {
		r.in <- l + "\n"
	}
}

// sendRaw queues bytes for In as they are.
func (r *rig) sendRaw(s string) { r.in <- s }

// closeIn ends In after everything queued has been read.
func (r *rig) closeIn() { r.inOnce.Do(func() { close(r.in) }) }

// nextDropped returns the next OnDropped call.
func (r *rig) nextDropped() dropped {
	r.t.Helper()
	select {
	case d := <-r.dropped:
		return d
	case <-time.After(waitTimeout):
		require.FailNow(r.t, "OnDropped was not called")
		return dropped{}
	}
}

// requireNoDrop fails the test if OnDropped has been called and not yet
// taken.
func (r *rig) requireNoDrop() {
	r.t.Helper()
	select {
	case d := <-r.dropped:
		require.FailNow(r.t, "unexpected OnDropped", "%v", d)
	default:
	}
}

// A harness is a rig with a connection made from its Transport.
type harness struct {
	*rig
	conn mcp.Connection
}

// newHarness connects a Transport over a new rig. maxLine 0 means the
// default. The connection is closed at cleanup.
func newHarness(t *testing.T, maxLine int) *harness {
	t.Helper()
	r := newRig(t)
	return r.connect(t, r.transport(maxLine))
}

// connect connects tr, a Transport over r set up as a test needs it, and
// closes the connection at cleanup.
func (r *rig) connect(t *testing.T, tr *stdio.Transport) *harness {
	t.Helper()
	conn, err := tr.Connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &harness{rig: r, conn: conn}
}

// read returns the next message Read delivers.
func (h *harness) read() jsonrpc.Message {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), waitTimeout)
	defer cancel()
	msg, err := h.conn.Read(ctx)
	require.NoError(h.t, err)
	return msg
}

// readRequest returns the next message, which must be a request with the
// given method and id (nil for a notification).
func (h *harness) readRequest(method string, id any) *jsonrpc.Request {
	h.t.Helper()
	msg := h.read()
	req, ok := msg.(*jsonrpc.Request)
	require.True(h.t, ok, "got %T, want *jsonrpc.Request", msg)
	require.Equal(h.t, method, req.Method)
	require.Equal(h.t, mustID(h.t, id), req.ID)
	return req
}

// write writes msg and requires success.
func (h *harness) write(msg jsonrpc.Message) {
	h.t.Helper()
	require.NoError(h.t, h.conn.Write(h.t.Context(), msg))
}

// mustID makes a jsonrpc.ID from a string, an int or nil.
func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	if n, ok := v.(int); ok {
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	require.NoError(t, err)
	return id
}

// pingLine is a valid ping request line with the given id.
func pingLine(id string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"ping"}`
}

// callLine is a tools/call request line with a progress token.
func callLine(id, token string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"progressToken":` + token + `}}}`
}

// cancelLine is a notifications/cancelled line for the request id.
func cancelLine(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"AbortError: user-cancel"}}`
}

// progress is a notifications/progress message from the server.
func progress(token string) *jsonrpc.Request {
	return &jsonrpc.Request{
		Method: "notifications/progress",
		Params: json.RawMessage(`{"progressToken":` + token + `,"progress":1,"total":2}`),
	}
}

// response is a successful response to id with the given result.
func response(t *testing.T, id any, result string) *jsonrpc.Response {
	t.Helper()
	return &jsonrpc.Response{ID: mustID(t, id), Result: json.RawMessage(result)}
}
