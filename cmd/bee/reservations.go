package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boards"
	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/githook"
	"github.com/tractat-us/bee/internal/pathcheck"
	"github.com/tractat-us/bee/repo"
)

// ReservationsCommand is `bee reservations`: who holds which paths of a
// repository. `bee reservations check` answers the commit guard for a
// person, and `bee reservations install-git-hook` installs that guard.
type ReservationsCommand struct {
	env *env

	repo   string
	all    bool
	from   string
	asJSON bool
}

func (c *ReservationsCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("reservations")
	fs.StringVar(&c.repo, "repo", "", repoFlagUsage)
	fs.BoolVar(&c.all, "all", false, "list the reservations of every repository")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the reservations")
	return fs
}

// Run lists the live reservations, or runs the subcommand args names.
func (c *ReservationsCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return c.check(ctx, args[1:])
		case "install-git-hook":
			return c.installGitHook(ctx, args[1:])
		}
	}
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee reservations --help", "bee reservations: unexpected argument %q (subcommands: check, install-git-hook)", fs.Arg(0))
	}
	if c.all && c.repo != "" {
		return usagef("bee reservations --help", "bee reservations: --all and --repo cannot go together")
	}
	name := ""
	if !c.all {
		var err error
		if name, err = c.env.repoName("reservations", c.repo); err != nil {
			return err
		}
	}
	b, err := c.env.open("reservations", false)
	if err != nil {
		return err
	}
	defer b.Close()
	rs, err := b.Reservations(ctx, name)
	if err != nil {
		return c.env.refusal(ctx, b, "reservations", "", err)
	}
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, rs)
	}
	if len(rs) == 0 {
		where := "in " + safe(name)
		if c.all {
			where = "in any repository"
		}
		_, err := fmt.Fprintf(out, "no reservations %s on %s\n", where, b.Location())
		return err
	}
	if !c.all {
		fmt.Fprintf(out, "reservations in %s\n", safe(name))
	}
	return printReservations(out, rs, c.all, time.Now())
}

// printReservations writes rs as a table, with each one's repository when
// withRepo.
func printReservations(w io.Writer, rs []actions.Reservation, withRepo bool, now time.Time) error {
	tw := newTable(w)
	head := "ID\tHOLDER\tKIND\tAGE\tACTION\tPATHS\tREASON"
	if withRepo {
		head = "ID\tREPO\tHOLDER\tKIND\tAGE\tACTION\tPATHS\tREASON"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rs {
		kind := "shared"
		if r.Exclusive {
			kind = "exclusive"
		}
		repoCell := ""
		if withRepo {
			repoCell = oneLine(r.Repo, 50) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.ID), repoCell, safe(r.Holder), kind, age(now, r.Since), orDash(r.Action),
			oneLine(strings.Join(r.Patterns, " "), 60), oneLine(orDash(r.Reason), 60))
	}
	return tw.Flush()
}

// maxCheckInput bounds what bee reservations check reads on stdin: a
// commit may name many thousands of paths.
const maxCheckInput = 64 << 20

// check is `bee reservations check`: which of the files named (as
// arguments, or in one wire.CheckPathsRequest as JSON on stdin) a live
// exclusive reservation of someone other than the person holds. The
// commit guard (bee-hook --pre-commit) runs it for a person's commit, with
// --json: one wire.CheckPathsAnswer as JSON on stdout, exit 0. No board
// yet means nothing is reserved.
func (c *ReservationsCommand) check(ctx context.Context, args []string) error {
	fs := c.env.flags("reservations check")
	fs.StringVar(&c.from, "from", "", "check as this person, whose own reservations never hold them (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the answer as JSON (allow, conflicts)")
	if err := c.env.parse(fs, args, c.checkUsage); err != nil {
		return helped(err)
	}
	who, err := c.env.person("reservations check", c.from)
	if err != nil {
		return err
	}
	req, err := c.checkRequest(fs.Args())
	if err != nil {
		return err
	}
	a, err := c.answer(ctx, who, req)
	if err != nil {
		return err
	}
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSONLine(out, a)
	}
	if a.Allow {
		_, err := fmt.Fprintln(out, "no reservation of anyone else holds these paths")
		return err
	}
	now := time.Now()
	tw := newTable(out)
	fmt.Fprintln(tw, "PATH\tHOLDER\tPATTERN\tAGE\tACTION\tREASON")
	for _, cf := range a.Conflicts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safe(cf.Path), safe(cf.Holder), safe(cf.Pattern), age(now, cf.Since), orDash(cf.Action), oneLine(orDash(cf.Reason), 60))
	}
	if a.More > 0 {
		fmt.Fprintf(tw, "and %d more\n", a.More)
	}
	return tw.Flush()
}

// checkRequest is what bee reservations check is asked: the files args
// names (relative to the working directory), or, with none, the request
// on stdin.
func (c *ReservationsCommand) checkRequest(args []string) (wire.CheckPathsRequest, error) {
	const hint = "give the paths as arguments, or one JSON request on stdin: see bee reservations check --help"
	var req wire.CheckPathsRequest
	if len(args) > 0 {
		wd, err := c.env.workDir()
		if err != nil {
			return req, fmt.Errorf("bee reservations check: the working directory: %w", err)
		}
		for _, p := range args {
			if !filepath.IsAbs(p) {
				p = filepath.Join(wd, p)
			}
			req.Paths = append(req.Paths, filepath.Clean(p))
		}
		req.Cwd = filepath.Clean(wd)
	} else {
		raw, err := io.ReadAll(io.LimitReader(c.env.main.Stdin, maxCheckInput+1))
		if err != nil {
			return req, fmt.Errorf("bee reservations check: read the request from stdin: %w", err)
		}
		if len(raw) > maxCheckInput {
			return req, usagef(hint, "bee reservations check: the request on stdin is more than %d bytes", maxCheckInput)
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			return req, usagef(hint, "bee reservations check: the request on stdin is not JSON of the paths to check: %v", err)
		}
	}
	// Validate in chunks the wire takes: a commit may name more paths
	// than one request carries.
	for i := 0; i < len(req.Paths) || i == 0; i += wire.MaxCheckPaths {
		chunk := req
		chunk.Paths = req.Paths[i:min(len(req.Paths), i+wire.MaxCheckPaths)]
		if err := chunk.Validate(); err != nil {
			return req, usagef(hint, "bee reservations check: %v", err)
		}
	}
	return req, nil
}

// answer asks the board as who about req's paths, judging each file in
// the repository its write lands in; the working directory of req (else
// bee's) is who's own folder.
func (c *ReservationsCommand) answer(ctx context.Context, who actions.Poster, req wire.CheckPathsRequest) (wire.CheckPathsAnswer, error) {
	home := req.Cwd
	if home == "" {
		wd, err := c.env.workDir()
		if err != nil {
			return wire.CheckPathsAnswer{}, fmt.Errorf("bee reservations check: the working directory: %w", err)
		}
		home = wd
	}
	var opts pathcheck.Options
	if r, err := repo.Locate(home); err == nil {
		opts.Home = r
	}
	b, err := c.env.open("reservations check", false)
	if errors.Is(err, boards.ErrNoBoard) {
		return wire.CheckPathsAnswer{Allow: true}, nil // no board: nothing is reserved
	}
	if err != nil {
		return wire.CheckPathsAnswer{}, err
	}
	defer b.Close()
	held, err := pathcheck.NewLocator(&opts).Check(ctx, b, who, req.Paths)
	if err != nil {
		return wire.CheckPathsAnswer{}, c.env.refusal(ctx, b, "reservations check", "", err)
	}
	return pathcheck.Answer(held), nil
}

func (c *ReservationsCommand) checkUsage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Say which of some files a live exclusive reservation of someone else holds:
whether a change to them now would be refused, and by whom. Each file is
judged in the repository its write lands in (through symbolic links).

Usage:

	bee reservations check [--from NAME] [--json] PATH...
	bee reservations check [--from NAME] --json < request.json

Without paths it reads one request on stdin, {"paths": [absolute paths],
"cwd": "..."}: git's pre-commit hook (bee-hook --pre-commit) asks this way
for a person's commit, and reads the answer that --json prints,
{"allow": true} or {"allow": false, "conflicts": [...]}. It exits 0
whatever the answer. Your own reservations never hold you. With no board
yet, nothing is reserved.

Flags:

`)
	fs := c.env.flags("reservations check")
	fs.String("from", "", "check as this person, whose own reservations never hold them (default $USER)")
	fs.Bool("json", false, "print the answer as JSON (allow, conflicts)")
	printFlags(w, fs)
}

// installGitHook is `bee reservations install-git-hook`: bee's git
// pre-commit hook in the repository of the working directory (githook).
func (c *ReservationsCommand) installGitHook(ctx context.Context, args []string) error {
	fs := c.env.flags("reservations install-git-hook")
	fs.BoolVar(&c.asJSON, "json", false, "print what was done as JSON")
	if err := c.env.parse(fs, args, c.installUsage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee reservations install-git-hook --help", "bee reservations install-git-hook: unexpected argument %q (run it in the repository)", fs.Arg(0))
	}
	dir, err := c.env.workDir()
	if err != nil {
		return fmt.Errorf("bee reservations install-git-hook: the working directory: %w", err)
	}
	exe, _ := os.Executable()
	beeHook, err := githook.FindBeeHook(exe)
	if err != nil {
		return refusedf(err, "go install github.com/tractat-us/bee/cmd/bee-hook@latest", "bee reservations install-git-hook: %v", err)
	}
	r, err := githook.Install(ctx, dir, beeHook)
	if err != nil {
		return refusedf(err, "run it inside a git worktree", "bee reservations install-git-hook: %v", err)
	}
	out := c.env.main.Stdout
	if c.asJSON {
		if err := writeJSON(out, hookResult{Path: r.Path, Written: r.Written, Replaced: r.Replaced, Foreign: r.Foreign, AddLine: r.AddLine, Shared: r.Shared}); err != nil {
			return err
		}
	} else if _, err := fmt.Fprint(out, githook.Describe(r)); err != nil {
		return err
	}
	if r.Foreign {
		return refusedf(nil, "add the line above to "+r.Path, "bee reservations install-git-hook: a pre-commit hook that is not bee's is there; nothing was installed")
	}
	return nil
}

// hookResult is githook.Result as --json prints it.
type hookResult struct {
	Path     string `json:"path"`
	Written  bool   `json:"written"`
	Replaced bool   `json:"replaced,omitempty"`
	Foreign  bool   `json:"foreign,omitempty"`
	AddLine  string `json:"addLine,omitempty"`
	Shared   string `json:"shared,omitempty"`
}

func (c *ReservationsCommand) installUsage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Install bee's git pre-commit hook in the repository of the working
directory: it refuses a commit that changes a path another live identity
holds exclusively, naming it (git commit --no-verify skips it). It never
overwrites a hook that is not bee's: it prints the line to add to it
instead, and exits 1. It honours core.hooksPath; the hook is shared by
every worktree of a clone.

Usage:

	bee reservations install-git-hook [--json]

`)
}

// Usage prints how to use `bee reservations`.
func (c *ReservationsCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `List who holds which paths of a repository: agents reserve the files they are
about to change, and bee refuses other sessions' edits (and commits) of
them while they hold them.

Usage:

	bee reservations [--repo DIR|NAME | --all] [--json]
	bee reservations check [--json] [PATH...]     (see bee reservations check --help)
	bee reservations install-git-hook             (see bee reservations install-git-hook --help)

A repository has one name for every clone and worktree of it: its origin
(github.com/owner/name), else its host and git folder.

Flags:

`)
	printFlags(w, c.flagSet())
}
