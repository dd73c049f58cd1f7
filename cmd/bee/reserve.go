package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// ReserveCommand is `bee reserve`: a person reserves paths of a
// repository, so that agents' edits and commits of them are refused until
// the person releases them (bee release).
type ReserveCommand struct {
	env *env

	reason string
	shared bool
	repo   string
	from   string
	asJSON bool
}

func (c *ReserveCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("reserve")
	fs.StringVar(&c.reason, "reason", "", "why you reserve them, in a few words: agents whose edits are refused read it (required)")
	fs.BoolVar(&c.shared, "shared", false, "share the paths with other shared reservations (default exclusive: nobody else may hold or edit them)")
	fs.StringVar(&c.repo, "repo", "", repoFlagUsage)
	fs.StringVar(&c.from, "from", "", "reserve as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the reservation as JSON")
	return fs
}

// Run reserves the patterns args names.
func (c *ReserveCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	const hint = `bee reserve 'src/auth/**' docs/auth.md --reason "reworking the login"`
	switch {
	case fs.NArg() == 0:
		return usagef(hint, "bee reserve: no paths given")
	case strings.TrimSpace(c.reason) == "":
		return usagef(hint, "bee reserve: --reason is required: agents whose edits are refused read it")
	}
	who, err := c.env.person("reserve", c.from)
	if err != nil {
		return err
	}
	name, err := c.env.repoName("reserve", c.repo)
	if err != nil {
		return err
	}
	b, err := c.env.open("reserve", false)
	if err != nil {
		return err
	}
	defer b.Close()
	r, err := b.Reserve(ctx, who, actions.ReserveRequest{Repo: name, Patterns: fs.Args(), Shared: c.shared, Reason: c.reason})
	if re, ok := errors.AsType[*actions.ReservedError](err); ok {
		return refusedf(err, "bee reservations shows who holds what; ask the holder with bee post --to NAME, or reserve other paths",
			"bee reserve: nothing was reserved: %s", reservedWhy(re))
	}
	if err != nil {
		return c.env.refusal(ctx, b, "reserve", "", err)
	}
	kind := "exclusive"
	if !r.Exclusive {
		kind = "shared"
	}
	return c.env.printValue(c.asJSON, r, fmt.Sprintf("reserved %s in %s for %s (%s): %s", safe(r.ID), safe(r.Repo), safe(r.Holder), kind,
		safe(strings.Join(r.Patterns, " "))))
}

// reservedWhy names who holds what in the way of a reservation.
func reservedWhy(re *actions.ReservedError) string {
	var parts []string
	for _, r := range re.Conflicts {
		parts = append(parts, actions.DescribeReservation(r, re.At))
	}
	return strings.Join(parts, "; ")
}

// Usage prints how to use `bee reserve`.
func (c *ReserveCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Reserve paths of a repository as a person (user:<name>): while you hold them,
agents' edits and commits of them are refused, naming you and your reason.
A person's reservation lasts until released (bee release).

Usage:

	bee reserve [flags] --reason REASON PATTERN...

A pattern is relative to the repository's root, '/'-separated: * matches
within one segment, ** across segments, and a pattern covers everything
below what it names (src/auth is the folder and all in it). Quote
patterns with * so the shell leaves them alone. Granted whole or refused
whole: a refusal names who holds what.

Flags:

`)
	printFlags(w, c.flagSet())
}

// ReleaseCommand is `bee release`: a person releases paths they reserved.
type ReleaseCommand struct {
	env *env

	repo   string
	all    bool
	from   string
	asJSON bool
}

func (c *ReleaseCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("release")
	fs.StringVar(&c.repo, "repo", "", repoFlagUsage)
	fs.BoolVar(&c.all, "all", false, "release everything you hold, in every repository")
	fs.StringVar(&c.from, "from", "", "release as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print what was released as JSON")
	return fs
}

// Run releases the patterns args names, or all the person holds in the
// repository.
func (c *ReleaseCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if c.all && (fs.NArg() > 0 || c.repo != "") {
		return usagef("drop --all to release some patterns of one repository", "bee release: --all releases everything, in every repository: give it no patterns and no --repo")
	}
	who, err := c.env.person("release", c.from)
	if err != nil {
		return err
	}
	name := ""
	if !c.all {
		if name, err = c.env.repoName("release", c.repo); err != nil {
			return err
		}
	}
	b, err := c.env.open("release", false)
	if err != nil {
		return err
	}
	defer b.Close()
	rs, err := b.ReleasePaths(ctx, who, name, fs.Args())
	if err != nil {
		return c.env.refusal(ctx, b, "release", "", err)
	}
	if rs == nil {
		rs = []actions.Reservation{}
	}
	if c.asJSON {
		return writeJSON(c.env.main.Stdout, rs)
	}
	out := c.env.main.Stdout
	if len(rs) == 0 {
		what := "nothing in " + safe(name)
		switch {
		case c.all:
			what = "nothing in any repository"
		case fs.NArg() > 0:
			what = "none of these patterns in " + safe(name)
		}
		_, err := fmt.Fprintf(out, "nothing to release: %s holds %s (bee reservations shows what is held)\n", safe(string(who)), what)
		return err
	}
	for _, r := range rs {
		fmt.Fprintf(out, "released %s from %s in %s\n", safe(strings.Join(r.Patterns, " ")), safe(r.ID), safe(r.Repo))
	}
	return nil
}

// Usage prints how to use `bee release`.
func (c *ReleaseCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Release paths you reserved (bee reserve), so that agents may change them again.

Usage:

	bee release [--repo DIR|NAME] [PATTERN...]
	bee release --all

Patterns are as you reserved them; without any, everything you hold in the
repository is released, and with --all everything you hold anywhere.

Flags:

`)
	printFlags(w, c.flagSet())
}

// printValue prints what a command did: v as indented JSON with --json,
// else line.
func (e *env) printValue(asJSON bool, v any, line string) error {
	if asJSON {
		return writeJSON(e.main.Stdout, v)
	}
	_, err := fmt.Fprintln(e.main.Stdout, line)
	return err
}
