package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/tractat-us/bee/actions"
)

// ReaddressCommand is `bee readdress`: a person sends an open action to
// someone else, for instance away from an identity that has gone.
type ReaddressCommand struct {
	env *env

	to     string
	anyone bool
	from   string
	asJSON bool
}

func (c *ReaddressCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("readdress")
	fs.StringVar(&c.to, "to", "", "the new recipient: an agent name, a live identity, a person (user:NAME) or people")
	fs.BoolVar(&c.anyone, "anyone", false, "address it to anyone instead")
	fs.StringVar(&c.from, "from", "", "act as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the action as JSON")
	return fs
}

// Run re-addresses the action named.
func (c *ReaddressCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	switch {
	case fs.NArg() != 1:
		return usagef("bee readdress a-7 --to reviewer", "bee readdress: want one action id, got %d arguments", fs.NArg())
	case c.to == "" && !c.anyone:
		return usagef("bee readdress a-7 --to reviewer", "bee readdress: say to whom with --to NAME, or --anyone")
	case c.to != "" && c.anyone:
		return usagef("bee readdress a-7 --to reviewer", "bee readdress: --to and --anyone cannot go together")
	}
	if err := checkTo("readdress", "bee readdress a-7 --to reviewer", c.to); err != nil {
		return err
	}
	id := fs.Arg(0)
	rec, err := c.env.changeAs(ctx, "readdress", c.from, id, func(b actions.Board, who actions.Poster) (actions.Record, error) {
		return b.Readdress(ctx, who, id, c.to)
	})
	if err != nil {
		return err
	}
	return c.env.printRecord(c.asJSON, rec, fmt.Sprintf("%s is now for %s: %s", safe(rec.ID), recipient(rec.To), oneLine(rec.Title, 60)))
}

// Usage prints how to use `bee readdress`.
func (c *ReaddressCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Send an open (or blocked) action to someone else: an agent name (whichever
of its sessions is free takes it), one live identity, or anyone. Use it for
work addressed to an identity that has gone.

Usage:

	bee readdress ID (--to WHO | --anyone)

Flags:

`)
	printFlags(w, c.flagSet())
}
