package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/tractat-us/bee/actions"
)

// CancelCommand is `bee cancel`: a person calls off an open or claimed
// action.
type CancelCommand struct {
	env *env

	reason string
	from   string
	asJSON bool
}

func (c *CancelCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("cancel")
	fs.StringVar(&c.reason, "reason", "", "why it is called off, at most 64 KiB (as on the board page); its holder is told when it next tries to finish it")
	fs.StringVar(&c.from, "from", "", "cancel as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the cancelled action as JSON")
	return fs
}

// Run cancels the action named.
func (c *CancelCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() != 1 {
		return usagef(`bee cancel a-7 --reason "not needed"`, "bee cancel: want one action id, got %d arguments", fs.NArg())
	}
	id := fs.Arg(0)
	rec, err := c.env.changeAs(ctx, "cancel", c.from, id, func(b actions.Board, who actions.Poster) (actions.Record, error) {
		return b.Cancel(ctx, who, id, c.reason)
	})
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("cancelled %s: %s", safe(rec.ID), oneLine(rec.Title, 60))
	if rec.Holder != "" {
		msg += fmt.Sprintf(" (%s held it; it is told when it next tries to finish it)", safe(rec.Holder))
	}
	return c.env.printRecord(c.asJSON, rec, msg)
}

// Usage prints how to use `bee cancel`.
func (c *CancelCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Call off an action that has not ended (open, blocked or claimed), as a
person. A cancelled action never changes again; whoever holds it is told,
with the reason, when it next tries to finish it, and the agent that posted
it hears of it. The actions that wait for it are cancelled too, naming it.

Usage:

	bee cancel [--reason TEXT] ID

Flags:

`)
	printFlags(w, c.flagSet())
}
