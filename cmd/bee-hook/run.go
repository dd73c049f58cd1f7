package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/tractat-us/bee/ancestry"
	"github.com/tractat-us/bee/hooks"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/termtext"
	"github.com/tractat-us/bee/internal/version"
	"github.com/tractat-us/bee/runfile"
)

const usageText = `Usage: bee-hook [flags]

bee-hook is bee's Claude Code hook. On /clear (SessionStart) it tells the
session's bridge (bee-mcp) to retire its identity, so the cleared
conversation carries on under a fresh one. With --wait-for-work it is the
wake-on-work waiter (an asyncRewake hook on Stop and SessionStart): it waits
for work for the idle session and wakes it with one line naming the action.
Claude Code runs it with the hook input on stdin; it prints nothing on
stdout, at most one line on stderr, and always exits 0, except the waiter's
wake, which exits 2.

With --guard it is the edit guard (a PreToolUse hook on Edit, Write,
MultiEdit and NotebookEdit): it asks the session's bridge whether another
live identity has reserved the file, and denies the call if so, printing
Claude Code's decision on stdout. With --pre-commit it is git's pre-commit
hook: it refuses (exit 1) a commit that changes a path another live
identity holds exclusively. Both let the work go ahead, saying so on
stderr, whenever bee cannot tell.

Examples:
  echo '{"source":"clear"}' | bee-hook              retire this session's bridge
  echo '{"source":"clear"}' | bee-hook --claude-pid 4242
                                                    retire the bridge of claude pid 4242
  bee-hook --list                                   show the registered bridges
  bee-hook --print-config                           print the hooks block for settings.json
  bee-hook --print-config --client codex            print the block for ~/.codex/config.toml
  bee-hook --print-config --client gemini           print the blocks for ~/.gemini/settings.json
  bee-hook --pre-commit                             check the staged paths (git runs this)

The run directory is $BEE_RUN_DIR, else ~/.bee/run.

Flags:
`

// envAttended, in the environment Claude Code gives a hook, is "1" in an
// interactive session and "0" in claude -p.
const envAttended = "CLAUDE_CODE_SESSION_ATTENDED"

// run is bee-hook: it parses args, does what they ask, and returns the exit
// status: 0, or hooks.ExitWake when the waiter wakes the session. A hook
// run (no --list, --print-config, --help or --version) writes nothing to
// stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(ctx, hooks.Config{}, hooks.WaitConfig{}, args, stdin, stdout, stderr)
}

// runWith is run with base configs whose bridge calls and Alive tests may
// fake; the flags set their RunDir, ClaudePID and bounds.
func runWith(ctx context.Context, base hooks.Config, wbase hooks.WaitConfig, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := newHookFlags()
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			f.fs.SetOutput(stdout)
			f.fs.PrintDefaults()
			return 0
		}
		return usageError(stderr, "%v", err)
	}
	if err := f.check(); err != nil {
		return usageError(stderr, "%v", err)
	}

	switch {
	case f.showVersion:
		fmt.Fprintf(stdout, "bee-hook %s\n", version.Version)
		return 0
	case f.printConfig:
		printConfig(f.client, stdout, stderr)
		return 0
	case f.list:
		alive := base.Alive
		if alive == nil {
			alive = liveness.Alive
		}
		if err := listBridges(f.runDir, alive, stdout); err != nil {
			fmt.Fprintf(stderr, "bee-hook: %s\n", termtext.Line(err.Error()))
		}
		return 0
	}

	if f.preCommit || f.guard {
		hc := hookConfig{
			bridge:  hooks.Bridge{RunDir: f.runDir, ClaudePID: f.claudePID, Alive: base.Alive, Listener: base.Listener},
			timeout: flagged(f.fs, "timeout", f.timeout),
		}
		if f.preCommit {
			return runPreCommit(ctx, hc, stderr)
		}
		return runGuard(ctx, hc, stdin, stdout, stderr)
	}
	if file, ok := stdin.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
		fmt.Fprintln(stderr, `bee-hook: stdin is a terminal, not a SessionStart input; try: echo '{"source":"clear"}' | bee-hook (or bee-hook --help)`)
		return 0
	}
	if f.waitForWork {
		return runWaiter(ctx, wbase, f, stdin, stderr)
	}
	cfg := base
	cfg.RunDir = f.runDir
	cfg.ClaudePID = f.claudePID
	cfg.Timeout = f.timeout
	if out := hooks.Run(ctx, cfg, stdin); out != "" {
		fmt.Fprintln(stderr, out)
	}
	return 0
}

// hookFlags are bee-hook's flags, bound to fs.
type hookFlags struct {
	fs                                                            *flag.FlagSet
	claudePID                                                     int
	runDir, client                                                string
	timeout, bridgeIn, rearmAfter                                 time.Duration
	list, printConfig, waitForWork, showVersion, guard, preCommit bool
}

// newHookFlags defines bee-hook's flags on a new flag set that reports no
// errors itself (runWith reports them on one line).
func newHookFlags() *hookFlags {
	f := &hookFlags{fs: flag.NewFlagSet("bee-hook", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(io.Discard)
	fs.IntVar(&f.claudePID, "claude-pid", 0, "aim at the bridge of this claude `pid` instead of the nearest claude ancestor")
	fs.StringVar(&f.runDir, "run-dir", "", "the run `directory` (default $BEE_RUN_DIR, else ~/.bee/run)")
	fs.DurationVar(&f.timeout, "timeout", hooks.DefaultTimeout, "give up after this `duration`")
	fs.BoolVar(&f.list, "list", false, "list the registered bridges on stdout (claude pid, bridge pid, alive or stale, port) and exit")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the hooks block that installs bee-hook (this binary, by its absolute path) on stdout and exit")
	fs.StringVar(&f.client, "client", "claude", "with --print-config: the `client` to print it for: claude (settings.json hooks), codex (config.toml) or gemini (settings.json)")
	fs.BoolVar(&f.waitForWork, "wait-for-work", false, "be the wake-on-work waiter: wait for work for the idle session and exit 2 with one line naming it")
	fs.DurationVar(&f.bridgeIn, "bridge-within", hooks.DefaultBridgeWithin, "waiter: how long to wait for a live bridge's run file (at start, and after a /mcp reconnect)")
	fs.DurationVar(&f.rearmAfter, "rearm-after", hooks.DefaultRearmAfter, "waiter: wake the session to re-arm after this `duration`, before Claude Code's hook timeout")
	fs.BoolVar(&f.showVersion, "version", false, "print the version on stdout and exit")
	fs.BoolVar(&f.guard, "guard", false, "be the edit guard, a PreToolUse hook: deny a file edit another live identity's reservation holds")
	fs.BoolVar(&f.preCommit, "pre-commit", false, "be git's pre-commit hook: refuse (exit 1) a commit that changes a path another live identity holds exclusively")
	return f
}

// check refuses parsed flags that cannot go together, saying why.
func (f *hookFlags) check() error {
	switch {
	case f.fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	case f.claudePID < 0:
		return fmt.Errorf("--claude-pid must be a positive pid, not %d", f.claudePID)
	case f.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %s", f.timeout)
	case f.bridgeIn <= 0:
		return fmt.Errorf("--bridge-within must be positive, not %s", f.bridgeIn)
	case f.rearmAfter <= 0:
		return fmt.Errorf("--rearm-after must be positive, not %s", f.rearmAfter)
	case countTrue(f.guard, f.preCommit, f.waitForWork) > 1:
		return errors.New("--guard, --pre-commit and --wait-for-work are different hooks: give one")
	case f.client != "claude" && f.client != "codex" && f.client != "gemini":
		return fmt.Errorf("--client must be claude, codex or gemini, not %q", f.client)
	}
	return nil
}

// printConfig is --print-config: the hooks block for client that installs
// this binary by its absolute path.
func printConfig(client string, stdout, stderr io.Writer) {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bee-hook: cannot find this binary's path (%v); printing the config with bare bee-hook, which needs bee-hook on the client's PATH\n", err)
		exe = "bee-hook"
	}
	switch client {
	case "codex":
		fmt.Fprint(stdout, hooks.CodexConfig(bridgeBeside(exe, stderr)))
	case "gemini":
		fmt.Fprint(stdout, hooks.GeminiConfig(bridgeBeside(exe, stderr), shellQuote(exe)))
	default:
		fmt.Fprint(stdout, hooks.ConfigFor(shellQuote(exe)))
	}
}

// runWaiter is --wait-for-work: the wake-on-work waiter, in an attended
// session only (in claude -p, or run by hand, a waiter would only block or
// delay).
func runWaiter(ctx context.Context, wbase hooks.WaitConfig, f *hookFlags, stdin io.Reader, stderr io.Writer) int {
	wcfg := wbase
	wcfg.Attended = os.Getenv(envAttended) == "1"
	if !wcfg.Attended {
		return 0
	}
	wcfg.RunDir = f.runDir
	wcfg.ClaudePID = f.claudePID
	wcfg.BridgeWithin = f.bridgeIn
	wcfg.RearmAfter = f.rearmAfter
	res := hooks.Wait(ctx, wcfg, stdin)
	if res.Line != "" {
		fmt.Fprintln(stderr, res.Line)
	}
	return res.Code
}

// bridgeBeside is the path of the bee-mcp installed next to bee-hook exe
// (go install puts both in one folder), or bare bee-mcp, said on stderr,
// when there is none.
func bridgeBeside(exe string, stderr io.Writer) string {
	p := filepath.Join(filepath.Dir(exe), "bee-mcp")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	fmt.Fprintf(stderr, "bee-hook: no bee-mcp next to %s; printing the config with bare bee-mcp, which needs bee-mcp on the client's PATH\n", exe)
	return "bee-mcp"
}

// shellQuote quotes s as one word for /bin/sh, which runs hook commands.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// usageError prints one line about bad flags or arguments on stderr and
// returns 0, the status bee-hook always exits with.
func usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "bee-hook: "+format+" (see bee-hook --help)\n", args...)
	return 0
}

// listBridges prints the run files in dir (or the default run directory)
// as a table. It never prints a token, and prints paths and errors inert
// (termtext): a directory name can hold escape sequences.
func listBridges(dir string, alive func(int) bool, stdout io.Writer) error {
	dir, err := runfile.Dir(dir)
	if err != nil {
		return err
	}
	files, err := runfile.List(dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fmt.Fprintf(stdout, "no bridges registered in %s\n", termtext.Line(dir))
		return nil
	}
	fmt.Fprintf(stdout, "run directory %s\n", termtext.Line(dir))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT PID\tCLIENT\tBRIDGE PID\tBRIDGE\tPORT\t")
	for _, f := range files {
		client := "-"
		if p, err := ancestry.Process(context.Background(), f.ClaudePID); err == nil {
			if c, ok := ancestry.Identify(p); ok {
				client = string(c)
			}
		}
		if f.Err != nil {
			fmt.Fprintf(tw, "%d\t%s\t-\tunreadable\t-\t%s\n", f.ClaudePID, client, termtext.Line(f.Err.Error()))
			continue
		}
		state := "alive"
		if !alive(f.Entry.PID) {
			state = "stale"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t\n", f.ClaudePID, client, f.Entry.PID, state, f.Entry.Port)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A claude running under another name is found by the fallbacks only:
	// say so, since the name rule is what people expect.
	for _, f := range files {
		if f.Err != nil || !alive(f.Entry.PID) {
			continue
		}
		p, err := ancestry.Process(context.Background(), f.ClaudePID)
		if err != nil {
			continue
		}
		if _, ok := ancestry.Identify(p); ok {
			continue
		}
		comm := p.Comm
		if chain, err := ancestry.Chain(context.Background(), f.Entry.PID); err != nil || len(chain) == 0 || chain[0].PID != f.ClaudePID {
			continue // not the bridge's parent: not a claude the bridge found
		}
		fmt.Fprintf(stdout, "note: claude pid %d runs as \"%s\", not as claude: its bridge took it as its parent (%s) and the /clear hook finds it by %s\n",
			f.ClaudePID, termtext.Line(comm), ancestry.ByParent, ancestry.ByClaudePID)
	}
	return nil
}
