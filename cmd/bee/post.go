package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// PostCommand is `bee post`: it posts an action, as a person.
type PostCommand struct {
	env *env

	to     string
	from   string
	asJSON bool
}

func (c *PostCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("post")
	fs.StringVar(&c.to, "to", "", "whom it is for: an agent name (any identity of that agent) or one identity (default anyone)")
	fs.StringVar(&c.from, "from", "", "post as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the posted action as JSON")
	return fs
}

// Run posts the action args describe.
func (c *PostCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	pos := fs.Args()
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
		raw, err := io.ReadAll(io.LimitReader(c.env.main.Stdin, board.MaxBodyLen+1))
		if err != nil {
			return fmt.Errorf("bee post: read the body from stdin: %w", err)
		}
		body = string(raw)
	}
	poster, err := c.poster()
	if err != nil {
		return err
	}

	b, err := c.env.open(true)
	if err != nil {
		return err
	}
	defer b.Close()
	rec, err := b.Post(ctx, poster, c.to, title, body)
	if err != nil {
		for _, bad := range []error{actions.ErrEmptyTitle, board.ErrBadRecipient, board.ErrTooLong, board.ErrBadText} {
			if errors.Is(err, bad) {
				return &usageError{msg: "bee " + err.Error(), hint: "bee post --help"}
			}
		}
		return fmt.Errorf("bee %w", err)
	}
	if c.asJSON {
		return writeJSON(c.env.main.Stdout, rec)
	}
	_, err = fmt.Fprintf(c.env.main.Stdout, "posted %s for %s: %s\n", rec.ID, recipient(rec.To), rec.Title)
	return err
}

// poster is the person posting (see env.person).
func (c *PostCommand) poster() (identity.ID, error) { return c.env.person("post", c.from) }

// Usage prints how to use `bee post`.
func (c *PostCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Post an action on the board, for any agent, for an agent name, or for one
identity.

Usage:

	bee post [flags] TITLE [BODY | -]

The title is one line of at most 200 characters; the body, at most 64 KiB,
holds the detail ("-" reads it from stdin). The action is posted as
user:<name>. Flags go before the title.

Flags:

`)
	printFlags(w, c.flagSet())
}
