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
// stdout and errors to stderr; it exits 0 on success, 1 on a failure and 2
// on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boards"
	"github.com/tractat-us/bee/internal/termtext"
	"github.com/tractat-us/bee/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(NewMain().Run(ctx, os.Args[1:]), os.Stderr))
}

// exitCode reports err to w the way a person reads it and returns the
// process's exit code: 0 for none, 2 for a usage error (with a hint), 1
// otherwise.
func exitCode(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	// Errors can quote board text (an id, a holder): shown inert.
	fmt.Fprintln(w, "Error:", termtext.Text(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.hint != "" {
			fmt.Fprintln(w, "Try:", ue.hint)
		}
		return 2
	}
	return 1
}

// A usageError is a command line bee cannot make sense of; hint says what
// to run instead. err, when set, is the cause, kept for errors.Is while msg
// says it in a person's words.
type usageError struct {
	msg  string
	hint string
	err  error
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Unwrap() error { return e.err }

// A plainError says a failure in a person's words while keeping its cause
// for errors.Is.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }

func (e *plainError) Unwrap() error { return e.err }

func usagef(hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint}
}

// Main is the bee program. Its fields are fixed before Run.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (BEE_BOARD, USER).
	Getenv func(string) string
}

// NewMain returns a Main on the process's standard streams and environment.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Run runs the command args names. It returns nil for --help, a
// *usageError for a command line it cannot parse, and the command's error
// otherwise. A command that runs until interrupted (watch) returns nil when
// ctx ends.
func (m *Main) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bee", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var boardPath string
	var showVersion bool
	fs.StringVar(&boardPath, "board", "", "")
	fs.BoolVar(&showVersion, "version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			m.Usage()
			return nil
		}
		return usagef("bee --help", "%v", err)
	}
	if showVersion {
		_, err := fmt.Fprintf(m.Stdout, "bee %s\n", version.Version)
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef("bee --help", "no command given (post, list, show, watch, agents, wait, cancel or readdress)")
	}
	e := &env{main: m, board: boardPath}
	name, rest := args[0], args[1:]
	switch name {
	case "post":
		return (&PostCommand{env: e}).Run(ctx, rest)
	case "list":
		return (&ListCommand{env: e}).Run(ctx, rest)
	case "show":
		return (&ShowCommand{env: e}).Run(ctx, rest)
	case "watch":
		return (&WatchCommand{env: e}).Run(ctx, rest)
	case "agents":
		return (&AgentsCommand{env: e}).Run(ctx, rest)
	case "wait":
		return (&WaitCommand{env: e}).Run(ctx, rest)
	case "cancel":
		return (&CancelCommand{env: e}).Run(ctx, rest)
	case "readdress":
		return (&ReaddressCommand{env: e}).Run(ctx, rest)
	case "serve":
		return (&ServeCommand{env: e}).Run(ctx, rest)
	case "help":
		m.Usage()
		return nil
	}
	return usagef("bee --help", "unknown command %q", name)
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
	watch      print actions as they change, until interrupted
	agents     list the live agents and what they hold
	wait       wait until actions have ended (exit 0 all done, 1 any failed)
	cancel     call off an open or claimed action
	readdress  send an open action to someone else
	serve      serve the board page, a live view in the browser

Every command takes --board, and all but serve take --json (the records
as JSON, for scripts). The board (a file, or a postgres:// URL for a board
shared across machines) is $`+boards.EnvLocation+`, else ~/.bee/board.db;
--board (before or after the command) overrides both. Run "bee <command>
--help" for a command's flags, "bee --version" for bee's version.
`, "\n"))
}

// env is what every command shares: the streams and the board's location.
type env struct {
	main  *Main
	board string // --board before the command; "" when not given
}

// flags returns a command's flag set, with --board.
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("bee-"+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.board, "board", e.board, "the board: a file, or a postgres:// URL (default $"+boards.EnvLocation+", else ~/.bee/board.db)")
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

// open opens the board: --board, else $BEE_BOARD, else ~/.bee/board.db;
// each is a file path or a postgres:// URL. Only post and watch create a
// missing board, and they say so on stderr; reading one that is not there
// is an error. Either way a mistyped location never passes for an empty
// board.
func (e *env) open(create bool) (actions.Board, error) {
	location := e.board
	if location == "" {
		var err error
		if location, err = boards.Location(e.main.Getenv); err != nil {
			return nil, err
		}
	}
	b, err := boards.Open(location, &boards.Options{MustExist: !create})
	if errors.Is(err, boards.ErrNoBoard) {
		return nil, fmt.Errorf("%w (check --board and $%s; bee post creates it)", err, boards.EnvLocation)
	}
	if err != nil {
		return nil, err
	}
	if boards.Created(b) {
		fmt.Fprintf(e.main.Stderr, "created a new board at %s\n", b.Location())
	}
	return b, nil
}

// printFlags writes a flag set's flags, for a command's usage.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
