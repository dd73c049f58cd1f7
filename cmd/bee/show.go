package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/termtext"
)

// ShowCommand is `bee show`: one action in full.
type ShowCommand struct {
	env *env

	asJSON bool
}

func (c *ShowCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("show")
	fs.BoolVar(&c.asJSON, "json", false, "print the action as JSON")
	return fs
}

// Run shows the action whose id args holds.
func (c *ShowCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() != 1 {
		return usagef("bee show a-7", "bee show: want one action id, got %d arguments", fs.NArg())
	}
	b, err := c.env.open("show", false)
	if err != nil {
		return err
	}
	defer b.Close()
	id := fs.Arg(0)
	r, err := b.Get(ctx, id)
	if err != nil {
		return c.env.refusal(ctx, b, "show", id, err)
	}

	links, err := planLinks(ctx, b, r)
	if err != nil {
		return c.env.refusal(ctx, b, "show", id, err)
	}

	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, shownAction{Record: r, planLinksOf: links})
	}
	return printShown(out, r, links)
}

// printShown writes r for a person: its fields as a table, its plan's
// links, then its body, result and reason.
func printShown(out io.Writer, r actions.Record, links planLinksOf) error {
	now := time.Now()
	tw := newTable(out)
	fmt.Fprintf(tw, "id:\t%s\n", safe(r.ID))
	fmt.Fprintf(tw, "title:\t%s\n", safe(r.Title))
	fmt.Fprintf(tw, "state:\t%s\n", describe(r))
	fmt.Fprintf(tw, "for:\t%s\n", recipient(r.To))
	fmt.Fprintf(tw, "from:\t%s\n", safe(r.From))
	fmt.Fprintf(tw, "priority:\t%d\n", r.Priority)
	if len(r.Paths) > 0 {
		fmt.Fprintf(tw, "paths:\t%s (in %s)\n", safe(strings.Join(r.Paths, " ")), safe(r.Repo))
	}
	if r.State == actions.Open && len(r.HeldBackBy) > 0 {
		fmt.Fprintf(tw, "held back:\t%s; nobody takes it until that is released\n", heldBack(r))
	}
	fmt.Fprintf(tw, "posted:\t%s (%s ago)\n", stamp(r.PostedAt), age(now, r.PostedAt))
	if r.ClaimedAt != nil {
		fmt.Fprintf(tw, "claimed:\t%s (%s ago)\n", stamp(*r.ClaimedAt), age(now, *r.ClaimedAt))
	}
	if r.EndedAt != nil {
		fmt.Fprintf(tw, "%s:\t%s (%s ago)\n", safe(string(r.State)), stamp(*r.EndedAt), age(now, *r.EndedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := links.print(out); err != nil {
		return err
	}
	for _, part := range []struct{ name, text string }{{"body", r.Body}, {"result", r.Result}, {"reason", r.Reason}} {
		if part.text != "" {
			fmt.Fprintf(out, "\n%s:\n%s\n", part.name, termtext.Text(strings.TrimRight(part.text, "\n")))
		}
	}
	return nil
}

// Usage prints how to use `bee show`.
func (c *ShowCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Show one action in full: its state, who holds or finished it, its body and
its result, the actions it waits for (prerequisites) and those that wait
for it (dependents), with their states.

Usage:

	bee show [--json] ID

Flags:

`)
	printFlags(w, c.flagSet())
}
