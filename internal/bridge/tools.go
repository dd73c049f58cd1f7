package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
)

// The bounds of bee_wait_action, from the design: long enough that an idle
// agent is cheap, short enough that a cancel or /clear lands within a minute.
const (
	DefaultWait = 45 * time.Second
	MaxWait     = 60 * time.Second
	// DefaultProgressInterval is how often a wait reports progress when the
	// call carries a progress token.
	DefaultProgressInterval = 10 * time.Second
	// progressQuiet is the stretch before a wait's bound in which no progress
	// is sent, so that none races the result (Claude Code logs a dropped
	// connection for a progress notification that arrives with or after it).
	progressQuiet = 500 * time.Millisecond
)

// Tool names, as the model calls them (mcp__<server>__<name> in Claude Code).
const (
	ToolWait    = "bee_wait_action"
	ToolList    = "bee_list_actions"
	ToolWhoami  = "bee_whoami"
	ToolPost    = "bee_post_action"
	ToolFinish  = "bee_finish_action"
	ToolRelease = "bee_release_action"
)

// ServerOptions configures NewServer. nil means defaults.
type ServerOptions struct {
	// Version is reported as the server's version; "" means "dev".
	Version string
	// ProgressInterval is how often a waiting call reports progress; 0
	// means DefaultProgressInterval. Tests shorten it.
	ProgressInterval time.Duration
	// Logger receives tool-call logs; nil means the Session's logger.
	Logger *slog.Logger
}

// instructions are the server's instructions, whatever the client;
// clients.Middleware adds what an idle session means under each one.
const instructions = `bee connects this session to a shared action board. Other agents and people post actions there.
To take work, call bee_wait_action: it claims the next action meant for you (waiting up to 45 s) and returns it. Do the action, then call bee_finish_action with its id and a short result. If someone else could do it, call bee_release_action; if it cannot be done as asked, call bee_fail_action with the reason.
To hand work to another agent, call bee_post_action; bee_await_action waits until it ends (done, failed or cancelled); bee_cancel_action calls it off. bee_whoami tells you your identity on the board.`

// NewServer returns an MCP server serving the tools of the session p
// holds or will hold. The server answers both handshakes (initialize and
// server/discover) without waiting for the session; connect it to a
// transport with Run or Connect.
func NewServer(p *Pending, opts *ServerOptions) *mcp.Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t := &tools{p: p, progressEvery: o.ProgressInterval, log: o.Logger}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bee", Title: "bee action board", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       slog.New(sdkHandler{o.Logger.Handler()}).With(logkey.Subsystem, "mcp"),
	})
	// Each connection's model is told what waiting means under its client
	// (how long a wait may last, whether bee can wake the session).
	srv.AddReceivingMiddleware(clients.Middleware(ToolWait, ToolAwait))
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv.AddTool(&mcp.Tool{
		Name:  ToolWait,
		Title: "Wait for an action",
		Description: "Take the next action on the bee board that this session may take: claims it and returns it, waiting up to timeoutSeconds (default 45, at most 60) for one. " +
			"Returns {records, cursor}: records holds the one action now claimed by you (do it, then call bee_finish_action with its id), " +
			"or is empty when there is none. " +
			"Pass the returned cursor next time if you like; never build one yourself. " +
			"One wait at a time: a new call ends an earlier one still waiting, which then claims nothing.",
		InputSchema:  waitInputSchema,
		OutputSchema: pageOutputSchema,
	}, t.logged(t.wait, waitBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolList,
		Title: "List actions on the board",
		Description: "List the actions on the bee board, oldest first, without claiming anything. " +
			"Returns {records, cursor}; pass the cursor as since to list only what came after.",
		InputSchema:  listInputSchema,
		OutputSchema: pageOutputSchema,
		Annotations:  readOnly,
	}, t.logged(t.list, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolWhoami,
		Title: "Who am I on the board",
		Description: "Report this session's identity on the bee board (agent:<name>#<8 hex>), its agent name, " +
			"the agent process (Claude Code, Codex CLI or Gemini CLI; claudePid) and session it belongs to, the client, and the action source.",
		InputSchema:  emptyInputSchema,
		OutputSchema: whoamiOutputSchema,
		Annotations:  readOnly,
	}, t.logged(t.whoami, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolPost,
		Title: "Post an action",
		Description: "Post a new action on the bee board for another agent or person to take. " +
			"to is optional: omit it for anyone, give an agent name, or one identity. Returns {action}.",
		InputSchema:  postInputSchema,
		OutputSchema: actionOutputSchema,
	}, t.logged(t.post, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolFinish,
		Title: "Finish an action",
		Description: "Mark an action you claimed (through bee_wait_action) as done, with an optional short result. " +
			"Pass the id exactly as it was returned. Returns {action}.",
		InputSchema:  finishInputSchema,
		OutputSchema: actionOutputSchema,
		Annotations:  &mcp.ToolAnnotations{IdempotentHint: false},
	}, t.logged(t.finish, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolRelease,
		Title: "Release an action",
		Description: "Give back an action you claimed but will not finish, so another agent can take it. " +
			"Pass the id exactly as it was returned. Returns {action}.",
		InputSchema:  releaseInputSchema,
		OutputSchema: actionOutputSchema,
	}, t.logged(t.release, setupBound))
	addOutcomeTools(srv, t)
	return srv
}

// A toolHandler is a tool's handler, given the session and the time by
// which the call must be answered.
type toolHandler func(ctx context.Context, s *Session, req *mcp.CallToolRequest, deadline time.Time) (*mcp.CallToolResult, error)

// setupBound is how long a tool call other than a wait may wait for the
// session to be set up (the board opened) before it says so.
func setupBound(*mcp.CallToolRequest) time.Duration { return 10 * time.Second }

// waitBound is a wait's own bound, so that the time spent waiting for the
// session counts against it: a wait always returns within timeoutSeconds.
// Arguments the wait will refuse count as the default.
func waitBound(req *mcp.CallToolRequest) time.Duration {
	return timeoutArg(req, "timeoutSeconds", "cursor")
}

// timeoutArg is the timeoutSeconds argument of a call that takes the
// arguments allowed, or DefaultWait when the call will be refused, cut to
// what the calling client allows (clients.Client.Cap).
func timeoutArg(req *mcp.CallToolRequest, allowed ...string) time.Duration {
	c := clients.FromRequest(req)
	a, err := parseArgs(req.Params.Arguments, allowed...)
	if err != nil {
		return c.Cap(DefaultWait)
	}
	secs, err := a.integer("timeoutSeconds", 1, int(MaxWait/time.Second), int(DefaultWait/time.Second))
	if err != nil {
		return c.Cap(DefaultWait)
	}
	return c.Cap(time.Duration(secs) * time.Second)
}

// logged turns a toolHandler into an mcp.ToolHandler that waits for the
// session, within the tool's bound, and logs a debug line for each call
// and its end.
func (t *tools) logged(h toolHandler, bound func(*mcp.CallToolRequest) time.Duration) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		deadline := start.Add(bound(req))
		t.log.Debug("tool call", logkey.Tool, req.Params.Name)
		sctx, cancel := context.WithDeadline(ctx, deadline)
		s, err := t.p.Wait(sctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			return toolError(fmt.Errorf("%w (its board is still opening); call %s again", err, req.Params.Name)), nil
		default:
			return toolError(fmt.Errorf("bee could not start: %w; fix it and restart the session (or run /mcp to reconnect)", err)), nil
		}
		res, err := h(ctx, s, req, deadline)
		t.log.Debug("tool call done", logkey.Tool, req.Params.Name, logkey.Elapsed, time.Since(start),
			"is_error", res != nil && res.IsError, logkey.Err, err)
		return res, err
	}
}

type tools struct {
	p             *Pending
	progressEvery time.Duration
	log           *slog.Logger

	waitMu sync.Mutex // guards the fields below
	// endWait ends the wait in flight, if any; waitSeq numbers the waits
	// so that a wait that ends clears only its own.
	endWait context.CancelCauseFunc
	waitSeq uint64
}

// errSuperseded ends a wait that a newer wait on the same connection
// replaces. A session has one model waiting at a time: an older wait still
// running when a newer one starts was abandoned by its client (its idle
// timeout gave up on it without a cancel), and an answer to it would hand
// a claim to nobody.
var errSuperseded = errors.New("superseded by a newer " + ToolWait + " call")

// startWait registers a wait and ends the one before it, if still running.
// The returned func unregisters it.
func (t *tools) startWait(cancel context.CancelCauseFunc) (done func()) {
	t.waitMu.Lock()
	defer t.waitMu.Unlock()
	if t.endWait != nil {
		t.endWait(errSuperseded)
	}
	t.waitSeq++
	seq := t.waitSeq
	t.endWait = cancel
	return func() {
		t.waitMu.Lock()
		defer t.waitMu.Unlock()
		if t.waitSeq == seq {
			t.endWait = nil
		}
	}
}

// toolError is a tool result the model reads as a failure.
func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// result is a successful tool result: structured content plus a short
// text rendering for clients that read only text.
func result(structured any, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{StructuredContent: structured, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// sourceError turns a source's refusal into words for the model; other
// errors pass through unchanged.
func sourceError(err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, actions.ErrBadCursor):
		return toolError(fmt.Errorf("%w; pass a cursor exactly as a bee tool returned it, or omit it to start over", err))
	case errors.Is(err, actions.ErrDeparted):
		return toolError(fmt.Errorf("%w: this bridge is shutting down (%s); call the tool again", err, newBridgeTakesOver))
	}
	return toolError(err)
}

func (t *tools) wait(ctx context.Context, s *Session, req *mcp.CallToolRequest, deadline time.Time) (*mcp.CallToolResult, error) {
	a, err := parseArgs(req.Params.Arguments, "timeoutSeconds", "cursor")
	if err != nil {
		return toolError(err), nil
	}
	secs, err := a.integer("timeoutSeconds", 1, int(MaxWait/time.Second), int(DefaultWait/time.Second))
	if err != nil {
		return toolError(err), nil
	}
	cursor, err := a.optString("cursor")
	if err != nil {
		return toolError(err), nil
	}
	who, idCtx, err := s.current()
	if err != nil {
		return sourceError(err), nil
	}
	// The waiter stays silent while this call is in flight: it gets the
	// action.
	defer s.beginWait()()
	// The wait ends when the call is cancelled, when its identity is
	// retired, or when a newer wait replaces it, whichever comes first.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer t.startWait(cancel)()
	who, idCtx, page, err := t.next(wctx, s, req, who, idCtx, actions.Cursor(cursor), deadline)
	switch {
	case ctx.Err() != nil:
		// Cancelled: nobody will read the answer, so give back anything
		// claimed at the last moment.
		if err == nil {
			s.giveBack(page.Records)
		}
		t.log.Debug("wait cancelled", logkey.Identity, who)
		return nil, ctx.Err()
	case idCtx.Err() != nil:
		// Retired or departed while waiting: what was claimed for the old
		// identity has gone back (or goes back now); the model must not
		// believe it holds it.
		if err == nil {
			s.giveBack(page.Records)
		}
		return toolError(s.endedWhileWaiting(who)), nil
	case errors.Is(context.Cause(wctx), errSuperseded):
		// Nobody reads this answer: whatever it claimed goes back, and the
		// newer wait may take it.
		if err == nil {
			s.giveBack(page.Records)
		}
		t.log.Info("wait superseded by a newer one", logkey.Identity, who)
		return toolError(fmt.Errorf("%w; this call claimed nothing", errSuperseded)), nil
	case err != nil:
		return sourceError(err), nil
	}
	c := clients.FromRequest(req)
	res := result(page, renderWait(page, int(c.Cap(time.Duration(secs)*time.Second)/time.Second), c))
	var claims []claimRef
	for _, r := range page.Records {
		t.log.Info("action claimed", logkey.Identity, who, logkey.ActionID, r.ID)
		claims = append(claims, claimRef{ID: r.ID, Holder: r.Holder})
	}
	if len(claims) > 0 {
		// Marks the claims this answer hands over, so that if it is never
		// delivered exactly these go back, and nothing a list showed.
		res.Meta = mcp.Meta{claimsMetaKey: claims}
	}
	return res, nil
}

// next is the heart of a wait, as who (whose retire ends idCtx) within
// wctx: a claim a wake made for who first (the woken model's call returns
// it at once), else the source's Next. When the source says who has
// departed though the session never departed it, the session carries on
// under a new identity and the wait goes on as that one. It returns the
// identity it waited as and the context that ends when that identity is
// retired.
func (t *tools) next(wctx context.Context, s *Session, req *mcp.CallToolRequest, who identity.ID, idCtx context.Context, cursor actions.Cursor, deadline time.Time) (identity.ID, context.Context, actions.Page, error) {
	for replaced := false; ; replaced = true {
		if rec, ok := s.takeHandover(wctx, who); ok {
			return who, idCtx, actions.Page{Records: []actions.Record{rec}, Cursor: cursor}, nil
		}
		nctx, cancel := context.WithCancel(wctx)
		stopRetireWatch := context.AfterFunc(idCtx, cancel)
		// What the session's setup took counts against the bound.
		timeout := max(time.Until(deadline), time.Millisecond)
		stopProgress := t.startProgress(nctx, req, deadline)
		page, err := s.source.Next(nctx, who, cursor, timeout)
		stopProgress()
		stopRetireWatch()
		cancel()
		if !replaced && errors.Is(err, actions.ErrDeparted) && wctx.Err() == nil && idCtx.Err() == nil {
			if _, rerr := s.replaceDeparted(wctx, who); rerr == nil {
				var cerr error
				if who, idCtx, cerr = s.current(); cerr != nil {
					return who, idCtx, actions.Page{}, cerr
				}
				continue
			}
		}
		return who, idCtx, page, err
	}
}

// claimsMetaKey names, in a wait result's _meta, the claims it hands over.
const claimsMetaKey = "bee/claims"

// A claimRef is one claim a wait result hands over.
type claimRef struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
}

// startProgress sends a progress notification every interval while a wait
// runs, when the call carries a progress token. The returned stop func
// returns only after the sender goroutine has ended, so no notification
// can follow the call's result.
func (t *tools) startProgress(ctx context.Context, req *mcp.CallToolRequest, deadline time.Time) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	timeout := deadline.Sub(start)
	wg.Go(func() {
		tick := time.NewTicker(t.progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				// Judge the quiet stretch by the clock now, not by when the
				// tick fired: a late tick must not land next to the result.
				if time.Until(deadline) < progressQuiet {
					return
				}
				elapsed := time.Since(start).Seconds()
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      elapsed,
					Total:         timeout.Seconds(),
					Message:       fmt.Sprintf("waiting for an action (%.0f of %.0f s)", elapsed, timeout.Seconds()),
				})
				if err != nil {
					t.log.Debug("progress not sent", logkey.Err, err)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

func renderWait(p actions.Page, secs int, c clients.Client) string {
	if len(p.Records) == 0 {
		return c.EmptyWait(secs, string(p.Cursor))
	}
	var b strings.Builder
	for _, r := range p.Records {
		fmt.Fprintf(&b, "Claimed action %s: %s\n", r.ID, r.Title)
		fmt.Fprintf(&b, "From %s, for %s.\n", r.From, forWhom(r.To))
		if r.Body != "" {
			fmt.Fprintf(&b, "\n%s\n\n", r.Body)
		}
		fmt.Fprintf(&b, "When done, call %s with id %q; if you cannot do it, call %s.\n", ToolFinish, r.ID, ToolRelease)
	}
	fmt.Fprintf(&b, "cursor: %s", p.Cursor)
	return b.String()
}

func forWhom(to string) string {
	if to == "" {
		return "anyone"
	}
	return to
}

func (t *tools) list(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	a, err := parseArgs(req.Params.Arguments, "since")
	if err != nil {
		return toolError(err), nil
	}
	since, err := a.optString("since")
	if err != nil {
		return toolError(err), nil
	}
	page, err := s.source.List(ctx, actions.Cursor(since))
	if err != nil {
		if errors.Is(err, actions.ErrBadCursor) {
			return toolError(&argError{name: "since", msg: err.Error() + "; pass a cursor exactly as a bee tool returned it, or omit it"}), nil
		}
		return sourceError(err), nil
	}
	var b strings.Builder
	if len(page.Records) == 0 {
		b.WriteString("No actions.")
	}
	for _, r := range page.Records {
		holder := ""
		if r.Holder != "" {
			holder = " by " + r.Holder
		}
		fmt.Fprintf(&b, "%s [%s%s] %s (for %s, from %s)\n", r.ID, r.State, holder, r.Title, forWhom(r.To), r.From)
	}
	fmt.Fprintf(&b, "\ncursor: %s", page.Cursor)
	return result(page, b.String()), nil
}

func (t *tools) whoami(_ context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	if _, err := parseArgs(req.Params.Arguments); err != nil {
		return toolError(err), nil
	}
	w := s.Whoami()
	w.Client = clients.FromRequest(req).String()
	claude := "none found"
	if w.ClaudePID != nil {
		claude = fmt.Sprint(*w.ClaudePID)
	}
	text := fmt.Sprintf("You are %s (agent %s) on the %s source. Agent process: %s. Session: %s. Client: %s.", w.Identity, w.Agent, w.Source, claude, orNone(w.SessionID), orNone(w.Client))
	return result(w, text), nil
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// actionResult is what post, finish and release return.
type actionResult struct {
	Action actions.Record `json:"action"`
}

func (t *tools) post(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	a, err := parseArgs(req.Params.Arguments, "to", "title", "body")
	if err != nil {
		return toolError(err), nil
	}
	to, err := a.optString("to")
	if err != nil {
		return toolError(err), nil
	}
	title, err := a.str("title")
	if err != nil {
		return toolError(err), nil
	}
	body, err := a.str("body")
	if err != nil {
		return toolError(err), nil
	}
	who, _, err := s.current()
	if err != nil {
		return sourceError(err), nil
	}
	rec, err := s.source.Post(ctx, actions.Agent(who), actions.Draft{To: to, Title: title, Body: body})
	if err != nil {
		if errors.Is(err, actions.ErrEmptyTitle) {
			return toolError(&argError{name: "title", msg: "must not be empty"}), nil
		}
		return sourceError(err), nil
	}
	t.log.Info("action posted", logkey.Identity, who, logkey.ActionID, rec.ID)
	return result(actionResult{rec}, fmt.Sprintf("Posted action %s for %s: %s", rec.ID, forWhom(rec.To), rec.Title)), nil
}

func (t *tools) finish(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	c, refused := parseActionCall(s, req, "result")
	if refused != nil {
		return refused, nil
	}
	res, err := c.optString("result")
	if err != nil {
		return toolError(err), nil
	}
	rec, err := s.source.Finish(ctx, c.who, c.id, res)
	if err != nil {
		return sourceError(err), nil
	}
	t.log.Info("action finished", logkey.Identity, c.who, logkey.ActionID, rec.ID)
	return result(actionResult{rec}, fmt.Sprintf("Action %s is done.", rec.ID)), nil
}

func (t *tools) release(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	c, refused := parseActionCall(s, req)
	if refused != nil {
		return refused, nil
	}
	rec, err := s.source.Release(ctx, c.who, c.id)
	if err != nil {
		return sourceError(err), nil
	}
	t.log.Info("action released", logkey.Identity, c.who, logkey.ActionID, rec.ID)
	return result(actionResult{rec}, fmt.Sprintf("Action %s is open again for others.", rec.ID)), nil
}

// An actionCall is a call to a tool that changes one action (finish,
// release, fail, cancel): its arguments, the action's id, and the identity
// the change is made as.
type actionCall struct {
	args
	id  string
	who identity.ID
}

// parseActionCall reads a call to a tool that changes one action, whose
// arguments are id and those named in others. A refusal comes back as the
// tool result to return.
func parseActionCall(s *Session, req *mcp.CallToolRequest, others ...string) (actionCall, *mcp.CallToolResult) {
	a, err := parseArgs(req.Params.Arguments, append([]string{"id"}, others...)...)
	if err != nil {
		return actionCall{}, toolError(err)
	}
	id, err := a.str("id")
	if err != nil {
		return actionCall{}, toolError(err)
	}
	who, _, err := s.current()
	if err != nil {
		return actionCall{}, sourceError(err)
	}
	return actionCall{args: a, id: id, who: who}, nil
}

// giveBack releases claimed records whose answer will never be read.
func (s *Session) giveBack(recs []actions.Record) {
	var claims []claimRef
	for _, r := range recs {
		if r.State == actions.Claimed && r.Holder != "" {
			claims = append(claims, claimRef{ID: r.ID, Holder: r.Holder})
		}
	}
	s.giveBackClaims(claims)
}

// giveBackClaims releases claims whose answer will never be read. It uses
// a fresh bounded context: the call's own context has ended.
func (s *Session) giveBackClaims(claims []claimRef) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, r := range claims {
		_, err := s.source.Release(ctx, identity.ID(r.Holder), r.ID)
		switch {
		case errors.Is(err, actions.ErrNotHeld):
			// A retire's departure put it back already.
			s.log.Debug("claim already back on the board", logkey.ActionID, r.ID)
			continue
		case err != nil:
			s.log.Warn("claim not given back", logkey.ActionID, r.ID, logkey.Err, err)
			continue
		}
		s.log.Info("claim given back, its answer was not delivered", logkey.ActionID, r.ID, logkey.Identity, r.Holder)
	}
}
