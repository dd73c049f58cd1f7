// Package lifecycle runs one bee-mcp process from start to clean end: it
// finds the Claude process, sets the session up on its action source,
// serves MCP on stdio and the control channel (/retire for /clear,
// /wait-for-work for the wake-on-work waiter), watches for every way the
// bridge can end, and cleans up within Claude Code's grace.
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
	return serve(ctx, cfg, cfg.Logger)
}

func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	start := time.Now()
	claude, found, err := ancestry.Find(ctx, ancestry.BridgeHints(os.Getenv))
	if err != nil {
		log.Warn("cannot walk the process tree", logkey.Err, err)
	}
	claudePID := claude.PID
	switch {
	case !found:
		claudePID = 0
		log.Warn("no claude process above this bridge; serving without the control channel, so /clear cannot retire this identity and no waiter can wake the session")
	case claude.Rule != ancestry.ByName:
		log.Warn("claude runs under another command name; taking this bridge's parent as the claude process because CLAUDECODE=1 (the /clear hook finds the same one through $CLAUDE_PID)",
			logkey.ClaudePID, claudePID, logkey.Comm, claude.Comm, logkey.Rule, string(claude.Rule))
	case !claude.Client.OwnsSession():
		// A run file keyed by a process that serves several sessions would
		// let one session's hook reach another's bridge. Codex starts a
		// bridge per session (thread) and ends it when the thread unloads,
		// so nothing is lost.
		log.Info("the agent process serves several sessions (Codex CLI's app-server); serving without the control channel",
			logkey.ClaudePID, claudePID, logkey.Comm, claude.Comm)
	}
	log = log.With(logkey.ClaudePID, claudePID)

	// The handshake does not wait for the board: the session is set up
	// while the client talks, and each tool call waits for it. The cleanup
	// abandons a setup still running (or retrying: the board is locked),
	// so that a bridge ending right after it starts leaves no member
	// behind (see bridge.Start).
	setupCtx, abandonSetup := context.WithCancel(ctx)
	defer abandonSetup()
	pending := bridge.Start(setupCtx, bridge.Config{
		Agent:     cfg.Agent,
		ClaudePID: claudePID,
		SessionID: cfg.SessionID,
		Logger:    log,

		HandoverWithin: cfg.HandoverWithin,
	}, func() (actions.Source, error) { return openSource(cfg, log) })

	// The control channel opens while the handshake is answered: nothing
	// in the handshake needs it, and writing the run file is the slowest
	// step of a start. ch is set once chOpened is closed; every use waits
	// for that (openChannel waits on nothing outside this process).
	var ch *channel
	chOpened := make(chan struct{})
	if found && claude.Client.OwnsSession() {
		go func() {
			defer close(chOpened)
			c, err := openChannel(cfg.RunDir, claudePID, pending, log)
			if err != nil {
				log.Warn("serving without the control channel (no /clear retire, no wake on work)", logkey.Err, err)
				return
			}
			ch = c
		}()
	} else {
		close(chOpened)
	}

	srv := bridge.NewServer(pending, &bridge.ServerOptions{Version: cfg.Version, ProgressInterval: cfg.ProgressInterval, Logger: log})
	transport := &stdio.Transport{
		In:     cfg.Stdin,
		Out:    cfg.Stdout,
		Logger: log,
		// OnDropped runs on the transport's reading goroutine or inside
		// Write: it only hands over, and the session's give-back worker
		// does the board write. Only a call that got as far as claiming has
		// a result to undo, so the session is set up by now.
		OnDropped: func(_ jsonrpc.ID, result json.RawMessage) {
			if s := pending.Session(); s != nil {
				s.GiveBackUndelivered(result)
			}
		},
	}
	ss, err := srv.Connect(ctx, transport, nil)
	if err != nil {
		// Leave nothing behind: no run file, no joined identity.
		<-chOpened
		ch.close(log)
		abandonSetup()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), departBound)
		defer cancel()
		if sess, werr := pending.Wait(dctx); werr == nil {
			sess.Depart(dctx)
			sess.Close()
		}
		return fmt.Errorf("serve MCP on stdio: %w", err)
	}
	// served is closed when the MCP session has ended; serveErr says why.
	served := make(chan struct{})
	var serveErr error
	go func() {
		defer close(served)
		serveErr = ss.Wait()
	}()
	log.Info("bee-mcp serving", logkey.Elapsed, time.Since(start))
	// Say when the session is ready, or why it never will be; this ends
	// when the setup does (the board's busy timeout bounds it).
	go func() {
		s, err := pending.Wait(ctx)
		switch {
		case err == nil:
			log.Info("session ready", logkey.Identity, s.Identity(), logkey.Source, cfg.Source, logkey.Elapsed, time.Since(start))
		case errors.Is(err, bridge.ErrSetupAbandoned):
			// The bridge is ending; bridge.Start has said so.
		default:
			log.Error("bee cannot serve actions; every tool call will say why", logkey.Err, err)
		}
	}()

	reason := waitForEnd(ctx, cfg.Signals, cfg.WatchEvery, served, claudePID, func() *channel {
		select {
		case <-chOpened:
			return ch
		default:
			return nil // not open yet: nothing to take over
		}
	}, log)
	if reason == "" {
		reason = "stdin closed"
		if serveErr != nil && !errors.Is(serveErr, io.EOF) {
			reason = "MCP session ended: " + serveErr.Error()
		}
	}

	// Clean up within Claude Code's grace (SIGTERM 100 ms after SIGINT,
	// SIGKILL 400 ms later), whatever else arrives: further signals land in
	// sigs and are ignored. Each step has its own bound, so a slow one
	// cannot starve the others.
	began := time.Now()
	// The run file first: it is cheap, and once it is gone no hook starts a
	// retire. Closing the channel also ends a retire in flight, so the
	// departure below never queues behind one.
	<-chOpened
	ch.close(log)
	// A setup still running ends now: one that has joined departs on its
	// own before Wait returns, one that has not never joins.
	abandonSetup()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), departBound)
	defer cancel()
	sess, err := pending.Wait(dctx)
	switch {
	case err == nil:
		if err := sess.Depart(dctx); err != nil {
			log.Error("departure not recorded; the board will reclaim this identity's claims when its lease runs out", logkey.Err, err)
		}
	case dctx.Err() != nil:
		log.Warn("session setup still running at exit; abandoned (a member it joins in the last moment shows until its lease runs out)", logkey.Err, err)
	}
	ss.Close()
	if !within(served, stepBound) {
		log.Warn("MCP session did not end within its bound; exiting anyway")
	}
	if sess != nil {
		// Closing the board can wait on another process's lock; the exit
		// does not.
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			sess.Close()
		}()
		if !within(closed, closeBound) {
			// Harmless: the departure is recorded, and SQLite finishes what
			// the close began (a WAL checkpoint, which can take a while on a
			// busy disk) the next time the board is opened.
			log.Debug("board still closing at exit; exiting anyway")
		}
	}
	log.Info("bee-mcp ends", logkey.Reason, reason, logkey.Elapsed, time.Since(began))
	return nil
}

// waitForEnd blocks until something ends the bridge and says what it was;
// "" means the MCP session itself ended (served was closed).
//
// opened returns the control channel, nil while it is not open (or when
// there is none).
func waitForEnd(ctx context.Context, sigs <-chan os.Signal, every time.Duration, served <-chan struct{}, claudePID int, opened func() *channel, log *slog.Logger) string {
	ppid := os.Getppid()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "context ended"
		case sig := <-sigs:
			return "signal " + sig.String()
		case <-served:
			return ""
		case <-tick.C:
			if os.Getppid() != ppid {
				return "parent process gone"
			}
			if claudePID != 0 && !liveness.Alive(claudePID) {
				return "claude process gone"
			}
			if ch := opened(); ch != nil && ch.takenOver(log) {
				return "run file taken over by a newer bridge"
			}
		}
	}
}
