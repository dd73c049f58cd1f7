package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions/boards"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/lifecycle"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/version"
	"github.com/tractat-us/bee/runfile"
)

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
	// Durations tests shorten: the progress interval, how long a claim
	// made for a wake waits for a bee_wait_action, how long a claim nobody
	// acts on waits before the session is reminded of it, and how often
	// the bridge checks that its parent, its claude and its run file are
	// still there.
	envProgress = "BEE_PROGRESS_INTERVAL"
	envHandover = "BEE_HANDOVER_WITHIN"
	envRemind   = "BEE_REMIND_AFTER"
	envWatch    = "BEE_WATCH_EVERY"
	// envSession is set by Claude Code when it spawns the bridge.
	envSession = "CLAUDE_CODE_SESSION_ID"
)

type config struct {
	agent, source, boardPath, runDir, logLevel string
	progress, handover, remind, watch          time.Duration
	showVersion                                bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cwd, _ := os.Getwd()
	c := config{
		agent:    envOr(envAgent, identity.NameFromDir(cwd)),
		source:   envOr(envSource, "board"),
		logLevel: envOr(envLogLevel, "info"),
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{envProgress, &c.progress}, {envHandover, &c.handover}, {envRemind, &c.remind}, {envWatch, &c.watch}} {
		if v := os.Getenv(d.env); v != "" {
			var err error
			if *d.to, err = time.ParseDuration(v); err != nil {
				return c, fmt.Errorf("%s=%q: %w", d.env, v, err)
			}
		}
	}
	fs := flag.NewFlagSet("bee-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nEnvironment: %s, %s, %s, %s, %s.\n", envAgent, envSource, boards.EnvLocation, runfile.EnvDir, envLogLevel)
	}
	fs.StringVar(&c.agent, "agent", c.agent, "agent name for this session's identities (env "+envAgent+"; default: the working directory's name)")
	fs.StringVar(&c.source, "source", c.source, "where actions come from: board (the shared board) or none (never anything)")
	fs.StringVar(&c.boardPath, "board", "", "the board: a file, or a postgres:// URL shared across machines (env "+boards.EnvLocation+"; default ~/.bee/board.db)")
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
// clean end, 2 for bad flags, 1 when it could not start. settled runs once
// the bridge has started (see lifecycle.Config.Settled).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, settled func()) int {
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
		fmt.Fprintf(stderr, "bee-mcp %s\n", version.Version)
		return 0
	}
	level, err := parseLevel(cfg.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "bee-mcp: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	err = lifecycle.Run(ctx, lifecycle.Config{
		Agent:            cfg.agent,
		Source:           cfg.source,
		BoardPath:        cfg.boardPath,
		RunDir:           cfg.runDir,
		SessionID:        os.Getenv(envSession),
		Version:          version.Version,
		ProgressInterval: cfg.progress,
		HandoverWithin:   cfg.handover,
		RemindAfter:      cfg.remind,
		WatchEvery:       cfg.watch,
		Stdin:            stdin,
		Stdout:           stdout,
		Signals:          sigs,
		Logger:           log,
		Settled:          settled,
	})
	if err != nil {
		log.Error("bee-mcp failed", logkey.Err, err)
		return 1
	}
	return 0
}
