// Command bee is the board's command line for people: post actions for
// agents, list and show them, watch the board live, and see which agents
// are live and what they hold.
//
//	bee [--board PATH|URL] <command> [flags] [args]
//
// The board is $BEE_BOARD, else ~/.bee/board.db, unless --board says
// otherwise (before or after the command); each is a file or a
// postgres:// URL. Tables are for people; --json
// gives scripts the records as the board reports them. bee writes results to
// stdout and errors to stderr, each error once, cause first, with what to
// do on a "Try:" line. Every command exits 0 on success, 1 when the board
// said no (or could not be used, or bee wait saw an action fail), 2 on a
// usage error, 124 when bee wait's --timeout passed, and 130 when
// interrupted (143 for SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boards"
	"github.com/tractat-us/bee/internal/termtext"
	"github.com/tractat-us/bee/internal/version"
)

func main() {
	ctx, stop := onSignal(context.Background())
	defer stop()
	os.Exit(exitCode(NewMain().Run(ctx, os.Args[1:]), os.Stderr))
}

// bee's exit codes, one scheme for every command (bee --help lists them).
const (
	exitOK      = 0
	exitNo      = 1 // the board said no, an awaited action failed, or the board could not be used
	exitUsage   = 2 // the command line is wrong
	exitTimeout = 124
	// exitInterrupted is 128 + SIGINT, as a shell reports a command
	// Ctrl-C ended; SIGTERM ends bee with 128 + 15.
	exitInterrupted = 130
)

// exitCode reports err to w the way a person reads it and returns the
// process's exit code: 0 for none, a *cliError's own code (with its hint
// on a "Try:" line), and 1 for any other error.
func exitCode(err error, w io.Writer) int {
	if err == nil {
		return exitOK
	}
	ce, ok := errors.AsType[*cliError](err)
	if !ok {
		// Errors can quote board text (an id, a holder): shown inert.
		fmt.Fprintln(w, "Error:", termtext.Line(err.Error()))
		return exitNo
	}
	if ce.msg != "" {
		fmt.Fprintln(w, "Error:", termtext.Line(ce.msg))
	}
	for _, d := range ce.detail {
		fmt.Fprintln(w, "  -", termtext.Line(d))
	}
	if ce.hint != "" {
		fmt.Fprintln(w, "Try:", termtext.Line(ce.hint))
	}
	return ce.code
}

// A cliError is an error said for a person: msg gives the cause first,
// detail its parts, one line each (the problems of a refused plan), hint
// what to run or do instead (printed on its own "Try:" line), and code
// the exit code. err, when set, is the cause, kept for errors.Is while msg
// says it in a person's words.
type cliError struct {
	code   int
	msg    string
	detail []string
	hint   string
	err    error
}

func (e *cliError) Error() string { return e.msg }

func (e *cliError) Unwrap() error { return e.err }

// usagef is a command line bee cannot make sense of (exit 2); hint says
// what to run instead.
func usagef(hint, format string, args ...any) error {
	return &cliError{code: exitUsage, msg: fmt.Sprintf(format, args...), hint: hint}
}

// refusedf is a refusal (exit 1) caused by err; hint says what to do.
func refusedf(err error, hint, format string, args ...any) error {
	return &cliError{code: exitNo, msg: fmt.Sprintf(format, args...), hint: hint, err: err}
}

// A signalled error is the cause of the context onSignal cancels.
type signalled struct{ sig os.Signal }

func (s *signalled) Error() string { return "interrupted by " + s.sig.String() }

// onSignal returns a context that the first SIGINT or SIGTERM cancels
// with a *signalled cause. After that signal, a second one has its default
// effect and ends bee at once, so a command stuck in its cleanup can
// still be stopped. stop releases the signals and ends the goroutine that
// waits for them.
func onSignal(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&signalled{s})
		case <-done:
		}
	})
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// interrupted is the error of a command that ctx's end cut short: exit
// 130 for SIGINT (or a context cancelled by other means), 128 + the
// signal's number for another signal. It keeps the message of a
// *cliError the command returned (bee wait says what it still waited
// for); other errors are ctx's end as seen from below, and say nothing
// more than "interrupted".
func interrupted(ctx context.Context, cmd string, err error) error {
	code := exitInterrupted
	if s, ok := errors.AsType[*signalled](context.Cause(ctx)); ok {
		if n, ok := s.sig.(syscall.Signal); ok {
			code = 128 + int(n)
		}
	}
	out := &cliError{code: code, err: err}
	switch ce, ok := errors.AsType[*cliError](err); {
	case ok:
		out.msg = ce.msg
	case err != nil && !errors.Is(err, errInterrupted):
		out.msg = "bee " + cmd + ": interrupted"
	}
	return out
}

// errInterrupted is what a command that runs until interrupted (watch,
// serve) returns when ctx ends: an ending, with nothing more to say.
var errInterrupted = errors.New("interrupted")

// Main is the bee program. Its fields are fixed before Run.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (BEE_BOARD, USER).
	Getenv func(string) string
	// LookupEnv tells a variable set to "" from one not set: BEE_BOARD
	// set but empty is refused. Nil means Getenv, which counts an empty
	// variable as unset.
	LookupEnv func(string) (string, bool)
	// Dir is the working directory, whose repository the reservations
	// commands speak of; "" means the process's.
	Dir string
}

// NewMain returns a Main on the process's standard streams and environment.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, LookupEnv: os.LookupEnv}
}

// lookupEnv reads a variable through LookupEnv, else Getenv.
func (m *Main) lookupEnv(k string) (string, bool) {
	if m.LookupEnv != nil {
		return m.LookupEnv(k)
	}
	v := m.Getenv(k)
	return v, v != ""
}

// commands names bee's commands, in the order bee --help lists them.
var commands = []string{"post", "list", "show", "plan", "watch", "agents", "wait", "cancel", "readdress", "inbox", "answer", "decline", "reservations", "reserve", "release", "backup", "serve"}

// Run runs the command args names. It returns nil for --help, a
// *cliError with exit code 2 for a command line it cannot parse, and the
// command's error otherwise. When ctx ends before the command does (the
// first Ctrl-C), the error is a *cliError with exit code 130 (128 + the
// signal's number for another signal in ctx's cause): a command that runs
// until interrupted (watch, serve) ends that way too.
func (m *Main) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bee", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e := &env{main: m}
	var showVersion bool
	fs.Var(&e.board, "board", "")
	fs.BoolVar(&showVersion, "version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			m.Usage()
			return nil
		}
		return usagef(flagHint(err, args), "%v", err)
	}
	if showVersion {
		_, err := fmt.Fprintf(m.Stdout, "bee %s\n", version.Version)
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef("bee --help", "no command given (%s)", strings.Join(commands, ", "))
	}
	name, rest := args[0], args[1:]
	err := m.dispatch(ctx, e, name, rest)
	if err != nil && ctx.Err() != nil {
		return interrupted(ctx, name, err)
	}
	return err
}

// dispatch runs the command name with its arguments.
func (m *Main) dispatch(ctx context.Context, e *env, name string, args []string) error {
	switch name {
	case "post":
		return (&PostCommand{env: e}).Run(ctx, args)
	case "list":
		return (&ListCommand{env: e}).Run(ctx, args)
	case "show":
		return (&ShowCommand{env: e}).Run(ctx, args)
	case "plan":
		return (&PlanCommand{env: e}).Run(ctx, args)
	case "watch":
		return (&WatchCommand{env: e}).Run(ctx, args)
	case "agents":
		return (&AgentsCommand{env: e}).Run(ctx, args)
	case "wait":
		return (&WaitCommand{env: e}).Run(ctx, args)
	case "cancel":
		return (&CancelCommand{env: e}).Run(ctx, args)
	case "readdress":
		return (&ReaddressCommand{env: e}).Run(ctx, args)
	case "reservations":
		return (&ReservationsCommand{env: e}).Run(ctx, args)
	case "reserve":
		return (&ReserveCommand{env: e}).Run(ctx, args)
	case "release":
		return (&ReleaseCommand{env: e}).Run(ctx, args)
	case "inbox":
		return (&InboxCommand{env: e}).Run(ctx, args)
	case "answer":
		return (&AnswerCommand{env: e}).Run(ctx, args)
	case "decline":
		return (&DeclineCommand{env: e}).Run(ctx, args)
	case "backup":
		return (&BackupCommand{env: e}).Run(ctx, args)
	case "serve":
		return (&ServeCommand{env: e}).Run(ctx, args)
	case "help":
		m.Usage()
		return nil
	}
	hint := "bee --help"
	if low := strings.ToLower(name); low != name && slices.Contains(commands, low) {
		hint = "commands are lower case: bee " + low
	}
	return usagef(hint, "unknown command %q", name)
}

// flagHint is the hint for a flag bee cannot parse before the command:
// only --board and --version go there, so a command's flag placed before
// the command ("bee --json list") gets told where it goes.
func flagHint(err error, args []string) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return "bee --help"
	}
	cmd := "COMMAND"
	for _, a := range args {
		if slices.Contains(commands, a) {
			cmd = a
			break
		}
	}
	return fmt.Sprintf("a command's flags go after its name: bee %s --%s (only --board and --version go before it)", cmd, name)
}

// Usage prints the overview.
func (m *Main) Usage() {
	fmt.Fprint(m.Stdout, strings.TrimLeft(`
bee is the command line of bee's action board, shared by every agent on
this machine.

Usage:

	bee [--board PATH|URL] <command> [--json] [flags] [args]

Commands:

	post       post an action for agents
	list       list the actions on the board
	show       show one action in full
	plan       show the plan an action belongs to, as a tree
	watch      print actions as they change, until interrupted
	agents     list the live agents and what they hold
	wait       wait until actions have ended
	cancel     call off an action that has not ended
	readdress  send an open action to someone else
	reservations  list who holds which paths of a repository
	reserve    reserve paths of a repository, so agents leave them alone
	release    release paths you reserved
	inbox      list the questions agents asked you (--watch: as they come)
	answer     answer a question: its agent is woken with the answer
	decline    decline a question, saying why
	backup     copy the board to a file, safely while agents use it
	serve      serve the board page, a live view in the browser

Every command takes --board, and all but backup and serve take --json
(the records as JSON, for scripts). The board (a file, or a postgres://
URL for a board shared across machines) is $`+boards.EnvLocation+`, else
~/.bee/board.db; --board (before or after the command) overrides both. An
empty --board or $`+boards.EnvLocation+` is refused rather than taken for the
default (an unset variable in a script, say), and so is a board file in a
folder that does not exist (bar ~/.bee, made when first needed). Run "bee
<command> --help" for a command's flags, "bee --version" for bee's
version.

Exit codes, the same for every command:

	0    done
	1    the board said no (an unknown id, a change it refused), bee wait
	     saw an action fail or be cancelled, or the board could not be used
	2    the command line is wrong
	124  bee wait: --timeout passed before every action ended
	130  interrupted (Ctrl-C); 143 for SIGTERM
`, "\n"))
}

// env is what every command shares: the streams and the board's location.
type env struct {
	main  *Main
	board boardFlag // --board, before or after the command
}

// A boardFlag is --board: its value, and whether it was given at all, so
// that --board "" is refused instead of read as "not given".
type boardFlag struct {
	value string
	set   bool
}

func (f *boardFlag) String() string { return f.value }

func (f *boardFlag) Set(v string) error {
	f.value, f.set = v, true
	return nil
}

// flags returns a command's flag set, with --board.
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("bee-"+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&e.board, "board", "the board: a file, or a postgres:// URL (default $"+boards.EnvLocation+", else ~/.bee/board.db)")
	return fs
}

// parse parses a command's flags, before or after its arguments (people
// type "bee show a-1 --json" as often as "bee show --json a-1"); for
// --help it prints usage and returns errHelp, which Run turns into success.
func (e *env) parse(fs *flag.FlagSet, args []string, usage func()) error {
	err := parseInterspersed(fs, args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		usage()
		return errHelp
	}
	name := strings.TrimPrefix(fs.Name(), "bee-")
	return usagef("bee "+name+" --help", "bee %s: %v", name, err)
}

// parseInterspersed parses flags wherever they stand among the arguments;
// everything after "--" is an argument. fs.Args() then holds the arguments
// in order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// errHelp ends a command that printed its usage on request.
var errHelp = errors.New("help printed")

// helped turns errHelp into success.
func helped(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// open opens the board for the command cmd: see location. Only post,
// watch and serve create a missing board (create), and they say so on
// stderr; reading one that is not there is an error, so a mistyped
// location never passes for an empty board.
func (e *env) open(cmd string, create bool) (actions.Board, error) {
	return e.openBy(cmd, create, time.Time{})
}

// openBy is open, ending by by when it is set, whatever a board's server
// does (see boards.Options.OpenBy).
func (e *env) openBy(cmd string, create bool, by time.Time) (actions.Board, error) {
	location, from, err := e.location(cmd)
	if err != nil {
		return nil, err
	}
	b, err := boards.Open(location, &boards.Options{MustExist: !create, OpenBy: by})
	switch {
	case errors.Is(err, boards.ErrNoBoard):
		// Said here, once: the boards' own words repeat themselves.
		what := "no board at " + shown(location)
		if boards.IsRemote(location) {
			what = "no board in the database " + shown(location)
		}
		return nil, refusedf(err, "check "+from+"; bee post creates a board", "bee %s: %s: nothing has been posted there yet", cmd, what)
	case err != nil:
		return nil, fmt.Errorf("bee %s: %w", cmd, err)
	}
	if boards.Created(b) {
		fmt.Fprintf(e.main.Stderr, "created a new board at %s\n", b.Location())
	}
	return b, nil
}

// location says where the board is, for the command cmd, and from names
// where that came from ("--board", "$BEE_BOARD" or the default), for
// errors: --board, else $BEE_BOARD, else ~/.bee/board.db; each a file path
// or a postgres:// URL. It refuses (exit 2) an empty --board or
// $BEE_BOARD, since in a script that is an unset variable far more often
// than a wish for the default board, and a board file whose folder does
// not exist (the default's ~/.bee excepted: the board makes it), since
// that is a mistyped path far more often than a new folder.
func (e *env) location(cmd string) (location, from string, err error) {
	env := boards.EnvLocation
	dflt, err := defaultBoard()
	if err != nil {
		return "", "", fmt.Errorf("bee %s: %w (give --board, or set $%s)", cmd, err, env)
	}
	switch v, ok := e.main.lookupEnv(env); {
	case e.board.set:
		location, from = e.board.value, "--board"
		if strings.TrimSpace(location) == "" {
			return "", "", usagef("bee "+cmd+" --board ~/.bee/board.db, or leave --board out",
				"bee %s: --board is empty; name a board file or a postgres:// URL (without --board, bee uses $%s, else %s)", cmd, env, dflt)
		}
	case ok:
		location, from = v, "$"+env
		if strings.TrimSpace(location) == "" {
			return "", "", usagef("unset "+env+" (to use "+dflt+"), or set it to a board file or a postgres:// URL",
				"bee %s: $%s is set but empty", cmd, env)
		}
	default:
		location, from = dflt, "--board and $"+env
	}
	if boards.IsRemote(location) || location == dflt {
		return location, from, nil
	}
	abs, err := filepath.Abs(location)
	if err != nil {
		return "", "", fmt.Errorf("bee %s: board %s: %w", cmd, location, err)
	}
	dir := filepath.Dir(abs)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", "", &cliError{code: exitUsage, err: err,
			msg:  fmt.Sprintf("bee %s: the folder %s of the board %s does not exist", cmd, dir, location),
			hint: fmt.Sprintf("check %s, or create the folder first: mkdir -p %s", from, shellQuote(dir))}
	}
	return location, from, nil
}

// defaultBoard is the board bee uses when neither --board nor $BEE_BOARD
// names one: ~/.bee/board.db.
func defaultBoard() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("where is the default board? %w", err)
	}
	return filepath.Join(home, ".bee", "board.db"), nil
}

// shown is a board's location as people may see it: a URL without its
// password, a file path as it is.
func shown(location string) string {
	if !boards.IsRemote(location) {
		return location
	}
	u, err := url.Parse(location)
	if err != nil {
		return "a postgres:// URL bee cannot parse"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	if q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// shellQuote quotes s for a shell command a person copies, when it needs
// quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printFlags writes a flag set's flags, for a command's usage.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
