// Package lifecycle runs one bee-mcp process from start to clean end, in
// three steps: start (find the Claude process, set the session up on its
// action source, serve MCP on stdio and the control channel: /retire for
// /clear, /wait-for-work for the wake-on-work waiter), wait (for every way
// the bridge can end) and cleanup (within Claude Code's grace).
//
// It promises that every clean end (stdin closed, a signal on Signals, the
// parent or the Claude process gone, the run file taken over by a newer
// bridge launched as this one was) removes the run file first, then closes
// the channel (a pending waiter is answered "shutting down" at once and
// looks for a newer bridge), then departs the identity so its claims go
// back, each step with its own bound, and that a later signal does not cut
// that short. Run returns only when all of that is done or its bound has
// passed. A newer bridge launched differently (a second server entry) does
// not end it: see launch.go.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boards"
	"github.com/tractat-us/bee/ancestry"
	"github.com/tractat-us/bee/internal/bridge"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/stdio"
	"github.com/tractat-us/bee/internal/version"
)

// Config is one bridge's configuration. The zero value of each field is
// documented.
type Config struct {
	// Agent is the agent name identities are minted for. Required.
	Agent string
	// Source is "board" or "none"; "" means "board".
	Source string
	// BoardPath is the board: a file, or a postgres:// URL (see
	// actions/boards); "" means $BEE_BOARD, else ~/.bee/board.db.
	BoardPath string
	// RunDir is the run directory; "" means runfile.DefaultDir().
	RunDir string
	// SessionID is the Claude Code session at start, "" when unknown.
	SessionID string
	// Version is the bridge's version as MCP reports it; "" means
	// version.Version.
	Version string
	// ProgressInterval is how often a wait reports progress; 0 means
	// bridge.DefaultProgressInterval.
	ProgressInterval time.Duration
	// HandoverWithin is how long a claim made for a wake waits for the
	// session's next bee_wait_action; 0 means bridge.DefaultHandoverWithin.
	HandoverWithin time.Duration
	// RemindAfter is how long a claim a wait handed over may go without a
	// finish, fail or release after the session's turn ended before the
	// session is reminded of it; 0 means bridge.DefaultRemindAfter.
	RemindAfter time.Duration
	// WatchEvery is how often the bridge checks that its parent and Claude
	// process live and that its run file is still its own; 0 means 2 s.
	WatchEvery time.Duration
	// Stdin and Stdout carry MCP. Required. Stdout carries JSON-RPC only.
	Stdin  io.Reader
	Stdout io.Writer
	// Signals ends the bridge on its first value; later values are
	// absorbed. nil means none.
	Signals <-chan os.Signal
	// Logger receives every log line; nil discards them.
	Logger *slog.Logger
	// Settled, when set, runs once the bridge has started: its session is
	// set up (or has failed to be) and MCP is served. The process may
	// settle there into how it idles (bee-mcp lowers its GC target).
	Settled func()
}

// Bounds on the steps of the bridge's cleanup, together well inside
// Claude Code's grace: it sends SIGTERM 100 ms after SIGINT and SIGKILL
// 400 ms after that. Removing the run file and departing take a few
// milliseconds on a healthy board; closing it may checkpoint its WAL, which
// on a busy disk takes longer and may be cut short without harm.
const (
	departBound = 200 * time.Millisecond
	stepBound   = 50 * time.Millisecond
	closeBound  = 100 * time.Millisecond
)

// within reports whether done is closed within d.
func within(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

const defaultWatchEvery = 2 * time.Second

// openSource opens the action source cfg names: the shared board (the
// default, a file or a server) or NoActions.
func openSource(cfg Config, log *slog.Logger) (actions.Source, error) {
	if cfg.Source == "none" {
		return actions.NoActions{}, nil
	}
	location := cfg.BoardPath
	if location == "" {
		var err error
		if location, err = boards.Location(os.Getenv); err != nil {
			return nil, err
		}
	}
	b, err := boards.Open(location, &boards.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if boards.Created(b) {
		log.Info("created a new board", logkey.Path, b.Location())
	}
	return b, nil
}

// Run serves one bridge until it ends and has cleaned up. It returns an
// error only when it could not start serving at all.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WatchEvery <= 0 {
		cfg.WatchEvery = defaultWatchEvery
	}
	if cfg.Source == "" {
		cfg.Source = "board"
	}
	if cfg.Version == "" {
		cfg.Version = version.Version
	}
	r, err := start(ctx, cfg)
	if err != nil {
		return err
	}
	r.cleanup(ctx, r.wait(ctx))
	return nil
}

// A running bridge: what start set up, for wait and cleanup.
type running struct {
	cfg       Config
	log       *slog.Logger
	began     time.Time
	claudePID int    // 0 when there is no Claude process above the bridge
	client    string // its client (ancestry.Client), "" when none

	pending      *bridge.Pending
	abandonSetup context.CancelFunc // ends a session setup still running

	// ch is the control channel, set (or left nil: none) once chOpened is
	// closed; every use waits for that.
	ch       *channel
	chOpened chan struct{}

	ss       *mcp.ServerSession
	served   chan struct{} // closed when the MCP session has ended
	serveErr error         // why it ended; read once served is closed

	listed *handshake // the client has listed the tools: the setup may begin
}

// start finds the Claude process and starts the session setup, the control
// channel and MCP on stdio side by side: the handshake waits for neither
// the board nor the run file, and the setup waits for the handshake
// (handshake). On error nothing is left behind.
func start(ctx context.Context, cfg Config) (*running, error) {
	r := &running{cfg: cfg, log: cfg.Logger, began: time.Now(), chOpened: make(chan struct{}), listed: newHandshake()}
	found := r.findClaude(ctx)
	// The cleanup abandons a setup still running (or retrying: the board
	// is locked), so that a bridge ending right after it starts leaves no
	// member behind (see bridge.Start).
	setupCtx, abandon := context.WithCancel(ctx)
	r.abandonSetup = abandon
	r.pending = bridge.Start(setupCtx, bridge.Config{
		Agent:          cfg.Agent,
		ClaudePID:      r.claudePID,
		Client:         r.client,
		SessionID:      cfg.SessionID,
		Logger:         r.log,
		HandoverWithin: cfg.HandoverWithin,
		RemindAfter:    cfg.RemindAfter,
	}, func() (actions.Source, error) {
		r.listed.wait(setupCtx, handshakeGrace)
		return openSource(cfg, r.log)
	})
	go r.openChannel(found)
	if err := r.serveMCP(ctx); err != nil {
		r.cleanup(ctx, "")
		return nil, fmt.Errorf("serve MCP on stdio: %w", err)
	}
	r.log.Info("bee-mcp serving", logkey.Elapsed, time.Since(r.began))
	go r.sayWhenReady(ctx)
	return r, nil
}

// findClaude finds the agent process (Claude Code, Codex CLI, Gemini CLI)
// above the bridge, says how, and reports whether the bridge should open
// its control channel for it: there is one, and it serves one session.
func (r *running) findClaude(ctx context.Context) bool {
	claude, found, err := ancestry.Find(ctx, ancestry.BridgeHints(os.Getenv))
	if err != nil {
		r.log.Warn("cannot walk the process tree", logkey.Err, err)
	}
	switch {
	case !found:
		r.log.Warn("no claude process above this bridge; serving without the control channel, so /clear cannot retire this identity and no waiter can wake the session")
		return false
	case claude.Rule != ancestry.ByName:
		r.log.Warn("claude runs under another command name; taking this bridge's parent as the claude process because CLAUDECODE=1 (the /clear hook finds the same one through $CLAUDE_PID)",
			logkey.ClaudePID, claude.PID, logkey.Comm, claude.Comm, logkey.Rule, string(claude.Rule))
	}
	r.claudePID, r.client = claude.PID, string(claude.Client)
	r.log = r.log.With(logkey.ClaudePID, claude.PID)
	if !claude.Client.OwnsSession() {
		// A run file keyed by a process that serves several sessions would
		// let one session's hook reach another's bridge. Codex starts a
		// bridge per session (thread) and ends it when the thread unloads,
		// so nothing is lost.
		r.log.Info("the agent process serves several sessions (Codex CLI's app-server); serving without the control channel",
			logkey.Comm, claude.Comm)
		return false
	}
	return true
}

// openChannel opens the control channel (writing the run file is the
// slowest step of a start) and closes chOpened. It waits on nothing
// outside this process.
func (r *running) openChannel(found bool) {
	defer close(r.chOpened)
	if !found {
		return
	}
	c, err := openChannel(r.cfg.RunDir, r.claudePID, r.pending, r.log)
	if err != nil {
		r.log.Warn("serving without the control channel (no /clear retire, no wake on work)", logkey.Err, err)
		return
	}
	r.ch = c
}

// channel returns the control channel, nil while it is not open (or when
// there is none).
func (r *running) channel() *channel {
	select {
	case <-r.chOpened:
		return r.ch
	default:
		return nil
	}
}

// serveMCP connects the bridge's MCP server to stdin and stdout.
func (r *running) serveMCP(ctx context.Context) error {
	srv := bridge.NewServer(r.pending, &bridge.ServerOptions{Version: r.cfg.Version, ProgressInterval: r.cfg.ProgressInterval, Logger: r.log})
	srv.AddReceivingMiddleware(r.listed.middleware)
	transport := &stdio.Transport{
		In:     r.cfg.Stdin,
		Out:    r.cfg.Stdout,
		Logger: r.log,
		// OnDropped runs on the transport's reading goroutine or inside
		// Write: it only hands over, and the session's give-back worker
		// does the board write. Only a call that got as far as claiming has
		// a result to undo, so the session is set up by now.
		OnDropped: func(_ jsonrpc.ID, result json.RawMessage) {
			if s := r.pending.Session(); s != nil {
				s.GiveBackUndelivered(result)
			}
		},
	}
	ss, err := srv.Connect(ctx, transport, nil)
	if err != nil {
		return err
	}
	r.ss, r.served = ss, make(chan struct{})
	go func() {
		defer close(r.served)
		r.serveErr = ss.Wait()
	}()
	return nil
}

// sayWhenReady says when the session is ready, or why it never will be;
// it ends when the setup does (the board's busy timeout bounds it).
func (r *running) sayWhenReady(ctx context.Context) {
	s, err := r.pending.Wait(ctx)
	if r.cfg.Settled != nil {
		defer r.cfg.Settled()
	}
	switch {
	case err == nil:
		r.log.Info("session ready", logkey.Identity, s.Identity(), logkey.Source, r.cfg.Source, logkey.Elapsed, time.Since(r.began))
	case errors.Is(err, bridge.ErrSetupAbandoned):
		// The bridge is ending; bridge.Start has said so.
	default:
		r.log.Error("bee cannot serve actions; every tool call will say why", logkey.Err, err)
	}
}

// wait blocks until something ends the bridge and says what it was.
func (r *running) wait(ctx context.Context) string {
	ppid := os.Getppid()
	tick := time.NewTicker(r.cfg.WatchEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "context ended"
		case sig := <-r.cfg.Signals:
			return "signal " + sig.String()
		case <-r.served:
			if r.serveErr != nil && !errors.Is(r.serveErr, io.EOF) {
				return "MCP session ended: " + r.serveErr.Error()
			}
			return "stdin closed"
		case <-tick.C:
			if reason := r.gone(ppid); reason != "" {
				return reason
			}
		}
	}
}

// gone says why the bridge must end though nothing told it to, or "".
func (r *running) gone(ppid int) string {
	switch {
	case os.Getppid() != ppid:
		return "parent process gone"
	case r.claudePID != 0 && !liveness.Alive(r.claudePID):
		return "claude process gone"
	}
	if ch := r.channel(); ch != nil && ch.takenOver(r.log) {
		return "run file taken over by a newer bridge"
	}
	return ""
}

// cleanup ends the bridge within Claude Code's grace (SIGTERM 100 ms after
// SIGINT, SIGKILL 400 ms later), whatever else arrives: further signals
// land in Signals and are ignored. Each step has its own bound, so a slow
// one cannot starve the others. reason is "" when the bridge never
// started serving.
func (r *running) cleanup(ctx context.Context, reason string) {
	began := time.Now()
	// The run file first: it is cheap, and once it is gone no hook starts a
	// retire. Closing the channel also ends a retire in flight, so the
	// departure below never queues behind one.
	<-r.chOpened
	r.ch.close(r.log)
	// A setup still running ends now: one that has joined departs on its
	// own before Wait returns, one that has not never joins.
	r.abandonSetup()
	sess := r.depart(ctx)
	if r.ss != nil {
		r.ss.Close()
		if !within(r.served, stepBound) {
			r.log.Warn("MCP session did not end within its bound; exiting anyway")
		}
	}
	if sess != nil {
		r.closeSession(sess)
	}
	if reason != "" {
		r.log.Info("bee-mcp ends", logkey.Reason, reason, logkey.Elapsed, time.Since(began))
	}
}

// depart departs the session's identity (its claims go back) within
// departBound, and returns the session, nil when it was never set up.
func (r *running) depart(ctx context.Context) *bridge.Session {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), departBound)
	defer cancel()
	sess, err := r.pending.Wait(dctx)
	switch {
	case err == nil:
		if err := sess.Depart(dctx); err != nil {
			r.log.Error("departure not recorded; the board will reclaim this identity's claims when its lease runs out", logkey.Err, err)
		}
	case dctx.Err() != nil:
		r.log.Warn("session setup still running at exit; abandoned (a member it joins in the last moment shows until its lease runs out)", logkey.Err, err)
	}
	return sess
}

// closeSession closes the session, which ends its lifetime (every
// background write stops) and closes the board. Closing the board can
// wait on another process's lock; the exit does not wait longer than
// closeBound.
func (r *running) closeSession(sess *bridge.Session) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		sess.Close()
	}()
	if !within(closed, closeBound) {
		// Harmless: the departure is recorded, and SQLite finishes what the
		// close began (a WAL checkpoint, which can take a while on a busy
		// disk) the next time the board is opened.
		r.log.Debug("board still closing at exit; exiting anyway")
	}
}
