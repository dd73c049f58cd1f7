package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
)

// Tool names, as the model calls them (mcp__<server>__<name> in Claude Code).
const (
	ToolWait    = "bee_wait_action"
	ToolList    = "bee_list_actions"
	ToolWhoami  = "bee_whoami"
	ToolPost    = "bee_post_action"
	ToolFinish  = "bee_finish_action"
	ToolRelease = "bee_release_action"
	ToolFail    = "bee_fail_action"
	ToolCancel  = "bee_cancel_action"
	ToolAwait   = "bee_await_action"
	ToolPlan    = "bee_post_plan"
)

// toolTable is every tool the bridge serves: what the model reads about
// it, and its handler, whose argument and answer types give the tool's
// input and output schemas. A new tool is one entry here and its handler.
func toolTable() []toolDef {
	def, max := DefaultWaitBounds.seconds()
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	return append([]toolDef{
		define(&mcp.Tool{Name: ToolWait, Title: "Wait for an action", Description: fmt.Sprintf(
			"Take the next action on the bee board that this session may take: claims it and returns it, waiting up to timeoutSeconds (default %d, at most %d) for one. "+
				"Returns {records, cursor, next}: records holds the one action now claimed by you (do it, then call %s with its id), or is empty when there is none. "+
				"Several calls may wait at once (subagents of one session): each gets an action of its own. "+
				"Pass the returned cursor next time if you like; never build one yourself. When bee refuses a call, error says why and next what to do.",
			def, max, ToolFinish)}, (*tools).wait),
		define(&mcp.Tool{Name: ToolList, Title: "List actions on the board", Annotations: readOnly, Description: "List the actions on the bee board, oldest first, without claiming anything. " +
			"Returns {records, cursor, next}, a page of at most about 64 KiB: long texts are cut short (cut is set on such a record; an action you take with " +
			ToolWait + " comes whole), and the next page starts at since=cursor."}, (*tools).list),
		define(&mcp.Tool{Name: ToolWhoami, Title: "Who am I on the board", Annotations: readOnly, Description: "Report this session's identity on the bee board (agent:<name>#<8 hex>), its agent name, " +
			"the agent process (Claude Code, Codex CLI or Gemini CLI: claudePid) and session it belongs to, the client, the repository it works in (repo), and the action source."}, (*tools).whoami),
		define(&mcp.Tool{Name: ToolPost, Title: "Post an action", Description: "Post a new action on the bee board for another agent or person to take. " +
			"to is optional: omit it for anyone, give an agent name, or one identity. " + askNote + "after names actions that must be done first (it stays blocked until then); " +
			"priority is 0 (most urgent) to 4, default 2. " + postPathsRule + " For several steps that must happen in an order, use " + ToolPlan + " instead. Returns {action, next}."}, (*tools).post),
		define(&mcp.Tool{Name: ToolPlan, Title: "Post a plan of actions", Description: planDescription()}, (*tools).postPlan),
		define(&mcp.Tool{Name: ToolFinish, Title: "Finish an action", Annotations: &mcp.ToolAnnotations{IdempotentHint: false}, Description: "Mark an action you claimed (through " + ToolWait + ") as done, " +
			"with an optional short result for its poster. Pass the id exactly as it was returned. Returns {action}."}, (*tools).finish),
		define(&mcp.Tool{Name: ToolRelease, Title: "Release an action", Description: "Give back an action you claimed but will not finish, so another agent can take it. " +
			"Pass the id exactly as it was returned. Returns {action}."}, (*tools).release),
		define(&mcp.Tool{Name: ToolFail, Title: "Fail an action", Description: "Mark an action you hold (claimed through " + ToolWait + ") as failed, saying why it cannot be done: " +
			"missing access, a wrong premise, broken input. Its poster is told the reason, and nobody retries it blindly. " +
			"If someone else could do it, call " + ToolRelease + " instead. Pass the id exactly as it was returned. Returns {action}."}, (*tools).fail),
		define(&mcp.Tool{Name: ToolCancel, Title: "Cancel an action you posted", Description: "Call off an action you (or an earlier identity of your agent) posted that is no longer needed, " +
			"whether it is still open or someone holds it, with an optional reason. Its holder's next " + ToolFinish + " is refused with your reason. Returns {action}."}, (*tools).cancel),
		define(&mcp.Tool{Name: ToolAwait, Title: "Wait for actions to end", Description: fmt.Sprintf(
			"Wait until at least one of the given actions has ended (done, failed or cancelled) and return those records. "+
				"Use it when you posted work for another agent with %s and need its outcome before you can go on. "+
				"Returns {records, next}; records is empty when none ended within timeoutSeconds (default %d, at most %d). "+
				"A failed action carries the reason it could not be done: read it and decide (fix what it names and post again, "+
				"do it yourself, or tell the user); do not post the same action again unchanged.", ToolPost, def, max)}, (*tools).await),
	}, reservationTools()...)
}

// instructions is what the server tells every client at the handshake;
// clients.Middleware adds what an idle session means under each client
// (whether bee can wake it), as it adds to the descriptions of the tools
// that wait and post.
func instructions() string {
	def, _ := DefaultWaitBounds.seconds()
	return fmt.Sprintf(`bee connects this session to a shared action board. Other agents and people post actions there.
To take work, call %[1]s: it claims the next action meant for you (waiting up to %[2]d s) and returns it. Do the action, then call %[3]s with its id and a short result. If someone else could do it, call %[4]s; if it cannot be done as asked, call %[5]s with the reason.
To hand work to another agent, call %[6]s; %[7]s waits until it ends (done, failed or cancelled); %[8]s calls it off. %[9]s tells you your identity on the board.
When the work has several steps that must happen in an order, post them all at once with %[10]s: bee opens each step when the steps it waits for are done, so you need not post, await and post again.
%[11]s
An answer's next field says what to do now; when bee refuses a call, its error field says why.`,
		ToolWait, def, ToolFinish, ToolRelease, ToolFail, ToolPost, ToolAwait, ToolCancel, ToolWhoami, ToolPlan, reservationInstructions)
}

// ServerOptions configures NewServer. nil means defaults.
type ServerOptions struct {
	// Version is reported as the server's version; "" means "dev".
	Version string
	// ProgressInterval is how often a waiting call reports progress; 0
	// means DefaultProgressInterval. Tests shorten it.
	ProgressInterval time.Duration
	// Logger receives tool-call logs; nil discards them.
	Logger *slog.Logger
}

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
		Instructions: instructions(),
		Logger:       slog.New(sdkHandler{o.Logger.Handler()}).With(logkey.Subsystem, "mcp"),
		Capabilities: servedCapabilities(),
	})
	// Each connection's model is told what waiting means under its client
	// (how long a wait may last, whether bee can wake the session).
	schemas, err := servedSchemas()
	if err != nil {
		panic(fmt.Sprintf("bridge: %v", err)) // the build is wrong
	}
	table := toolTable()
	served := servedTools{handlers: make(map[string]mcp.ToolHandler, len(table))}
	for _, d := range table {
		tool, h, err := d.bind(t, schemas)
		if err != nil {
			panic(fmt.Sprintf("bridge: tool %s: %v", d.name, err)) // the table is wrong
		}
		served.list = append(served.list, tool)
		served.handlers[tool.Name] = h
	}
	// By name, as the SDK's registry lists them.
	slices.SortFunc(served.list, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	srv.AddReceivingMiddleware(
		clients.Middleware(clients.Tools{Wait: ToolWait, Await: ToolAwait, Post: ToolPost, Plan: ToolPlan}),
		served.middleware)
	return srv
}

// tools is what every tool handler shares.
type tools struct {
	p             *Pending
	progressEvery time.Duration
	log           *slog.Logger
}

// A toolDef is one entry of the tool table.
type toolDef struct {
	name string
	// schemas derives the tool's input and output schemas from its Go
	// types (see schema.go); the bridge serves them from schemas.json.
	schemas func() (toolSchemas, error)
	// bind makes the tool, with its schemas as in, and its MCP handler.
	bind func(t *tools, in map[string]toolSchemas) (*mcp.Tool, mcp.ToolHandler, error)
}

// A toolCall is one tool call as a handler sees it.
type toolCall struct {
	s        *Session
	req      *mcp.CallToolRequest
	bounds   WaitBounds
	deadline time.Time // when the answer is due
}

// A handler does one tool's work on arguments already decoded: it returns
// the answer, or an error that refuses the call (the model reads the
// error, and what to do about it, in the answer's Guidance). A handler
// that returns ctx's error when ctx has ended sends no answer: the call was
// cancelled.
type handler[In, Out any] func(t *tools, ctx context.Context, c *toolCall, in In) (Out, error)

// A timed input is the arguments of a tool that waits: the call's deadline
// is its own timeout, so that the time spent waiting for the session counts
// against it.
type timed interface {
	timeout(WaitBounds) time.Duration
}

// A metaCarrier is an answer with _meta to send along.
type metaCarrier interface {
	meta() mcp.Meta
}

// define makes the table entry of a tool whose arguments decode into In
// and whose answer is an Out.
func define[In, Out any](tool *mcp.Tool, h handler[In, Out]) toolDef {
	schemas := func() (toolSchemas, error) {
		in, err := inputSchema[In]()
		if err != nil {
			return toolSchemas{}, fmt.Errorf("input schema: %w", err)
		}
		out, err := outputSchema[Out]()
		if err != nil {
			return toolSchemas{}, fmt.Errorf("output schema: %w", err)
		}
		return marshalSchemas(in, out)
	}
	return toolDef{name: tool.Name, schemas: schemas, bind: func(t *tools, served map[string]toolSchemas) (*mcp.Tool, mcp.ToolHandler, error) {
		s, ok := served[tool.Name]
		if !ok {
			return nil, nil, fmt.Errorf("no schemas in schemas.json (regenerate it: %s)", regenerate)
		}
		if len(s.Input) == 0 || len(s.Output) == 0 {
			return nil, nil, fmt.Errorf("schemas.json lacks its input or output schema (regenerate it: %s)", regenerate)
		}
		tt := *tool
		tt.InputSchema, tt.OutputSchema = s.Input, s.Output
		fields := argFields(reflect.TypeFor[In]())
		return &tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return serve(ctx, t, req, fields, h)
		}, nil
	}}
}

// serve runs one call: it decodes the arguments, waits for the session
// within the call's bound, runs the handler and makes its answer.
func serve[In, Out any](ctx context.Context, t *tools, req *mcp.CallToolRequest, fields []argField, h handler[In, Out]) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	start := time.Now()
	t.log.Debug("tool call", logkey.Tool, name)
	c := &toolCall{req: req, bounds: boundsFor(req)}
	in, err := decodeArgs[In](fields, req.Params.Arguments, c.bounds)
	if err != nil {
		return t.done(name, start, refusal(name, err)), nil
	}
	bound := setupBound
	if ti, ok := any(in).(timed); ok {
		bound = ti.timeout(c.bounds)
	}
	c.deadline = start.Add(bound)
	if c.s, err = t.session(ctx, c.deadline); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return t.done(name, start, refusal(name, err)), nil
	}
	out, err := h(t, ctx, c, in)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err() // cancelled: nobody reads an answer
	case err != nil:
		return t.done(name, start, refusal(name, err)), nil
	}
	res := answer(out)
	if m, ok := any(out).(metaCarrier); ok {
		res.Meta = m.meta()
	}
	return t.done(name, start, res), nil
}

// done logs a call's end and returns its answer.
func (t *tools) done(name string, start time.Time, res *mcp.CallToolResult) *mcp.CallToolResult {
	t.log.Debug("tool call done", logkey.Tool, name, logkey.Elapsed, time.Since(start), logkey.IsError, res.IsError)
	return res
}

// session waits for the session to be set up, until deadline.
func (t *tools) session(ctx context.Context, deadline time.Time) (*Session, error) {
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	s, err := t.p.Wait(sctx)
	switch {
	case err == nil:
		return s, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w (%w)", errOpening, err)
	}
	return nil, fmt.Errorf("%w: %w", errNotStarted, err)
}
