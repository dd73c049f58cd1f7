package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/ancestry"
	"github.com/tractat-us/bee/bridge"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/logkey"
	"github.com/tractat-us/bee/runfile"
	"github.com/tractat-us/bee/stdio"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `bee-mcp: bee's bridge, the stdio MCP server Claude Code spawns for each session.

Usage:
  bee-mcp [flags]

It speaks MCP on stdin/stdout (never run it by hand in a terminal expecting
output) and logs to stderr. Register it with Claude Code:

  claude mcp add --scope user bee -- bee-mcp

Flags:
`

// The environment the bridge reads, beside its flags.
const (
	envAgent    = "BEE_AGENT"
	envLogLevel = "BEE_LOG_LEVEL"
	envSource   = "BEE_SOURCE"
	// envProgress shortens the progress interval, for tests.
	envProgress = "BEE_PROGRESS_INTERVAL"
	// envSession is set by Claude Code when it spawns the bridge.
	envSession = "CLAUDE_CODE_SESSION_ID"
)

// Bounds on the steps of the bridge's cleanup. Claude Code sends SIGTERM
// 100 ms after SIGINT and SIGKILL 400 ms after that; removing the run file
// and departing take a few milliseconds on a healthy board.
const (
	departBound = 200 * time.Millisecond
	stepBound   = 50 * time.Millisecond
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

// watchEvery is how often the bridge checks that its Claude process is
// alive and that its run file is still its own.
const watchEvery = 2 * time.Second

type config struct {
	agent, source, boardPath, runDir, logLevel string
	progress                                   time.Duration
	showVersion                                bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cwd, _ := os.Getwd()
	c := config{
		agent:    envOr(envAgent, identity.NameFromDir(cwd)),
		source:   envOr(envSource, "board"),
		logLevel: envOr(envLogLevel, "info"),
	}
	if v := os.Getenv(envProgress); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q: %w", envProgress, v, err)
		}
		c.progress = d
	}
	fs := flag.NewFlagSet("bee-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nEnvironment: %s, %s, %s, %s, %s.\n", envAgent, envSource, board.EnvPath, runfile.EnvDir, envLogLevel)
	}
	fs.StringVar(&c.agent, "agent", c.agent, "agent name for this session's identities (env "+envAgent+"; default: the working directory's name)")
	fs.StringVar(&c.source, "source", c.source, "where actions come from: board (the shared board) or none (never anything)")
	fs.StringVar(&c.boardPath, "board", "", "board database file (env "+board.EnvPath+"; default ~/.bee/board.db)")
	fs.StringVar(&c.runDir, "run-dir", "", "run directory for the /retire channel's run file (env "+runfile.EnvDir+"; default ~/.bee/run)")
	fs.StringVar(&c.logLevel, "log-level", c.logLevel, "debug, info, warn or error (env "+envLogLevel+")")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; bee-mcp takes flags only", fs.Arg(0))
	}
	if err := identity.CheckName(c.agent); err != nil {
		return c, fmt.Errorf("--agent: %w", err)
	}
	if c.source != "board" && c.source != "none" {
		return c, fmt.Errorf("--source %q: want board or none", c.source)
	}
	return c, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(strings.ToUpper(s)))
	if err != nil {
		return l, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// run is the bridge's whole life. It returns the exit code: 0 for every
// clean end, 2 for bad flags, 1 when it could not start.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bee-mcp: %v\nTry: bee-mcp --help\n", err)
		return 2
	}
	if cfg.showVersion {
		// stdout is the protocol; a person asking for the version reads stderr
		// just as well, and a client never sends --version.
		fmt.Fprintf(stderr, "bee-mcp %s\n", version)
		return 0
	}
	level, err := parseLevel(cfg.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "bee-mcp: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, cfg, log, stdin, stdout, sigs); err != nil {
		log.Error("bee-mcp failed", logkey.Err, err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdin io.Reader, stdout io.Writer, sigs <-chan os.Signal) error {
	start := time.Now()
	claudePID, found, err := ancestry.ClaudePID(ctx)
	if err != nil {
		log.Warn("cannot walk the process tree", logkey.Err, err)
	}
	if !found {
		claudePID = 0
		log.Warn("no claude process above this bridge; serving without the /retire channel, so /clear cannot retire this identity")
	}
	log = log.With(logkey.ClaudePID, claudePID)

	// The handshake does not wait for the board: the session is set up
	// while the client talks, and each tool call waits for it.
	pending := bridge.Start(ctx, bridge.Config{
		Agent:     cfg.agent,
		ClaudePID: claudePID,
		SessionID: os.Getenv(envSession),
		Logger:    log,
	}, func() (actions.Source, error) { return openSource(cfg, log) })

	var ch *channel
	if found {
		ch, err = openChannel(cfg.runDir, claudePID, pending, log)
		if err != nil {
			log.Warn("serving without the /retire channel", logkey.Err, err)
		}
	}

	srv := bridge.NewServer(pending, &bridge.ServerOptions{Version: version, ProgressInterval: cfg.progress, Logger: log})
	transport := &stdio.Transport{
		In:     stdin,
		Out:    stdout,
		Logger: log,
		OnDropped: func(_ jsonrpc.ID, result json.RawMessage) {
			// Only a call that got as far as claiming has a result to undo,
			// so the session is set up by now.
			if s, err := pending.Wait(ctx); err == nil {
				s.GiveBackUndelivered(result)
			}
		},
	}
	ss, err := srv.Connect(ctx, transport, nil)
	if err != nil {
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
		if s, err := pending.Wait(ctx); err == nil {
			log.Info("session ready", logkey.Identity, s.Identity(), logkey.Source, cfg.source, logkey.Elapsed, time.Since(start))
		} else {
			log.Error("bee cannot serve actions; every tool call will say why", logkey.Err, err)
		}
	}()

	reason := waitForEnd(ctx, sigs, served, claudePID, ch, log)
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
	ch.close(log)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), departBound)
	defer cancel()
	sess, err := pending.Wait(dctx)
	if err == nil {
		if err := sess.Depart(dctx); err != nil {
			log.Error("departure not recorded; the board will reclaim this identity's claims when its lease runs out", logkey.Err, err)
		}
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
		if !within(closed, stepBound) {
			log.Warn("board did not close within its bound; exiting anyway")
		}
	}
	log.Info("bee-mcp ends", logkey.Reason, reason, logkey.Elapsed, time.Since(began))
	return nil
}

// waitForEnd blocks until something ends the bridge and says what it was;
// "" means the MCP session itself ended (served was closed).
func waitForEnd(ctx context.Context, sigs <-chan os.Signal, served <-chan struct{}, claudePID int, ch *channel, log *slog.Logger) string {
	ppid := os.Getppid()
	tick := time.NewTicker(watchEvery)
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
			if claudePID != 0 && syscall.Kill(claudePID, 0) == syscall.ESRCH {
				return "claude process gone"
			}
			if ch != nil && ch.takenOver(log) {
				return "run file taken over by a newer bridge"
			}
		}
	}
}
