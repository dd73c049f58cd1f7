package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/tractat-us/bee/actions"
)

// watchPoll is how long one wait on the board lasts before watch waits
// again; it bounds nothing a person sees.
const watchPoll = 30 * time.Second

// WatchCommand is `bee watch`: every action as it changes, until
// interrupted.
type WatchCommand struct {
	env *env

	all    bool
	asJSON bool
}

func (c *WatchCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("watch")
	fs.BoolVar(&c.all, "all", false, "first print every action on the board")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object per line for each change")
	return fs
}

// Run prints each new or changed action until ctx ends, then returns
// errInterrupted. It says on stderr when it has started watching.
func (c *WatchCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee watch --help", "bee watch: unexpected argument %q", fs.Arg(0))
	}
	b, err := c.env.open("watch", true)
	if err != nil {
		return err
	}
	defer b.Close()
	cursor := actions.Cursor("")
	if !c.all {
		if cursor, err = b.Head(ctx); err != nil {
			return c.env.refusal(ctx, b, "watch", "", err)
		}
	}
	fmt.Fprintf(c.env.main.Stderr, "watching %s; interrupt (Ctrl-C) to stop\n", b.Location())

	out := c.env.main.Stdout
	for {
		page, err := b.Changes(ctx, cursor, watchPoll)
		if ctx.Err() != nil {
			return errInterrupted
		}
		if err != nil {
			return c.env.refusal(ctx, b, "watch", "", err)
		}
		for _, r := range page.Records {
			if c.asJSON {
				err = writeJSONLine(out, r)
			} else {
				_, err = fmt.Fprintf(out, "%s  %-5s  %-40s  for %-20s  %s\n",
					time.Now().Format("15:04:05"), safe(r.ID), describe(r), recipient(r.To), oneLine(r.Title, 60))
			}
			if err != nil {
				return err
			}
		}
		cursor = page.Cursor
	}
}

// Usage prints how to use `bee watch`.
func (c *WatchCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Print each action as it is posted, claimed, finished or released, until
interrupted (Ctrl-C; bee then exits 130, as for any interrupted command).
Changes made by any process on this machine show within milliseconds.

Usage:

	bee watch [--all] [--json]

Flags:

`)
	printFlags(w, c.flagSet())
}
