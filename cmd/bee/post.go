package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// PostCommand is `bee post`: it posts an action, as a person.
type PostCommand struct {
	env *env

	to     string
	from   string
	paths  string
	repo   string
	asJSON bool
	// Plans (postplan.go).
	after    idList
	priority intFlag
	plan     string
}

func (c *PostCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("post")
	fs.StringVar(&c.to, "to", "", "whom it is for: an agent name (any identity of that agent), one identity, a person (user:NAME) or people (default anyone)")
	fs.StringVar(&c.from, "from", "", "post as this person (default $USER)")
	fs.StringVar(&c.paths, "paths", "", "the files the work will change, as comma-separated path patterns ('src/auth/**,docs/auth.md'): whoever takes it holds them")
	fs.StringVar(&c.repo, "repo", "", "with --paths: "+repoFlagUsage)
	fs.BoolVar(&c.asJSON, "json", false, "print the posted action as JSON")
	c.planFlags(fs)
	return fs
}

// Run posts the action args describe.
func (c *PostCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	pos := fs.Args()
	if c.plan != "" {
		return c.postPlan(ctx, pos)
	}
	switch {
	case len(pos) == 0:
		return usagef("bee post --help", "bee post: no title given")
	case len(pos) > 2:
		return usagef(`bee post [--to NAME] "TITLE" "BODY"`, "bee post: %d arguments given; quote the title and the body, and put flags before them", len(pos))
	}
	title, body := pos[0], ""
	if len(pos) == 2 {
		body = pos[1]
	}
	if body == "-" {
		var err error
		if body, err = c.stdinBody(); err != nil {
			return err
		}
	}
	poster, err := c.poster()
	if err != nil {
		return err
	}
	if err := checkTo("post", `bee post --to reviewer "TITLE" (an agent name), --to agent:reviewer#0491068b (one identity), --to user:alice (a person) or --to people`, c.to); err != nil {
		return err
	}

	d := actions.Draft{To: c.to, Title: title, Body: body}
	if err := c.withPaths(&d); err != nil {
		return err
	}
	b, err := c.env.open("post", true)
	if err != nil {
		return err
	}
	defer b.Close()
	d.After, d.Priority = c.after, c.priority.ptr()
	rec, err := b.Post(ctx, poster, d)
	switch {
	case errors.Is(err, actions.ErrEmptyTitle):
		return &cliError{code: exitUsage, err: err, msg: "bee post: the title is blank; an action needs one", hint: `bee post "TITLE" ["BODY"]`}
	case err != nil:
		return c.env.refusal(ctx, b, "post", "", err)
	}
	rec = viewed(ctx, b, rec)
	line := fmt.Sprintf("posted %s for %s: %s", safe(rec.ID), recipient(rec.To), safe(rec.Title))
	if rec.State == actions.Blocked {
		line += fmt.Sprintf(" (blocked until %s %s done)", safe(strings.Join(rec.BlockedBy, ", ")), plural(len(rec.BlockedBy), "is", "are"))
	}
	return c.env.printRecord(c.asJSON, rec, line+heldBackLine(rec))
}

// stdinBody reads the body from stdin (bee post TITLE -), refusing one
// larger than an action holds.
func (c *PostCommand) stdinBody() (string, error) {
	raw, err := io.ReadAll(io.LimitReader(c.env.main.Stdin, actions.MaxBodyLen+1))
	if err != nil {
		return "", fmt.Errorf("bee post: read the body from stdin: %w", err)
	}
	if len(raw) > actions.MaxBodyLen {
		// Only the first MaxBodyLen+1 bytes were read: the limit is all
		// bee knows.
		return "", &cliError{code: exitUsage, err: actions.ErrTooLong,
			msg:  fmt.Sprintf("bee post: the body on stdin is more than %d bytes (64 KiB), the most an action holds", actions.MaxBodyLen),
			hint: "put the detail in a file, and name the file in a shorter body"}
	}
	return string(raw), nil
}

// poster is the person posting (see env.person).
func (c *PostCommand) poster() (actions.Poster, error) { return c.env.person("post", c.from) }

// nameRule says why identity.CheckName refuses name, in words that fit a
// person's name as well as an agent's (identity's own message calls every
// name an agent name).
func nameRule(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > identity.MaxNameLen:
		return fmt.Sprintf("is longer than %d characters", identity.MaxNameLen)
	case name == identity.ReservedName:
		return fmt.Sprintf("is not %q, which is reserved: --to %s alone addresses every person", name, name)
	}
	return "holds letters, digits, '.', '_' and '-' only, and starts with a letter or digit"
}

// checkTo refuses a --to the board would refuse, saying what a recipient
// looks like: the board's own error is three causes deep. cmd names the
// command and hint what to run instead.
func checkTo(cmd, hint, to string) error {
	switch {
	case to == "" || identity.IsID(to) || actions.ForPeople(to):
		return nil
	case strings.HasPrefix(to, actions.UserPrefix):
		name := strings.TrimPrefix(to, actions.UserPrefix)
		return usagef(hint, "bee %s: --to %q is not a person, whose name after user: %s", cmd, to, nameRule(name))
	case strings.HasPrefix(to, identity.Prefix):
		return usagef(hint, "bee %s: --to %q is not an identity, which looks like agent:<name>#<8 lowercase hex digits> (bee agents lists them); to reach whichever session of an agent is free, give the agent's name alone", cmd, to)
	case identity.CheckName(to) != nil:
		return usagef(hint, "bee %s: --to %q is not an agent name, which %s", cmd, to, nameRule(to))
	}
	return nil
}

// Usage prints how to use `bee post`.
func (c *PostCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Post an action on the board, for any agent, for an agent name, for one
identity, or for people: one person (user:NAME) or any person (people).

Usage:

	bee post [flags] TITLE [BODY | -]
	bee post --plan FILE|- [--from NAME] [--json]

The title is one line of at most 200 characters, with no control
characters; the body, at most 64 KiB, holds the detail ("-" reads it from
stdin). The action is posted as
user:<name>. Flags go before the title.

With --after, the action waits for other actions: it is blocked, and
nobody can take it, until every one of them is done; it is cancelled if
one of them fails or is cancelled. --priority is 0 (most urgent) to 4
(default 2): of the open actions an agent may take, the most urgent is
taken first.

With --paths it carries the files the work will change, as path patterns
of a repository: whoever takes it holds them while working on it, and
while someone else holds any of them the action is held back (bee show
says by whom) and nobody is woken for it.

With --plan, bee posts several actions at once, all or none: FILE ("-"
for stdin) holds a JSON array of steps, each
{"key", "to"?, "title", "body"?, "after"?, "priority"?, "paths"?},
where "after" names the keys of the steps it waits for (in any order) or
ids of existing actions, and "paths" are as --paths (in the repository
--repo names, or the one bee runs in):

	[{"key": "schema", "to": "db", "title": "Migrate the schema"},
	 {"key": "api", "title": "Update the API", "after": ["schema"]},
	 {"key": "load", "title": "Run the load test", "after": ["api"]}]

It prints each key and the id it became (--json: the records and the
key-to-id map). A cycle, an unknown key or id, a duplicate key or more
than 1,000 steps refuse the whole plan, naming each problem.

Flags:

`)
	printFlags(w, c.flagSet())
}
