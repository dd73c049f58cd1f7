package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/tractat-us/bee/actions"
)

// ListCommand is `bee list`: the actions on the board, oldest first.
type ListCommand struct {
	env *env

	all    bool
	state  string
	asJSON bool
}

func (c *ListCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("list")
	fs.BoolVar(&c.all, "all", false, "include ended actions (done, failed, cancelled)")
	fs.StringVar(&c.state, "state", "", "only actions in this state: open, blocked, claimed, done, failed, cancelled, or ended (any of the last three)")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the actions")
	return fs
}

// Run lists the actions: by default those that have not ended (open,
// blocked or claimed).
func (c *ListCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee list --help", "bee list: unexpected argument %q", fs.Arg(0))
	}
	if c.state != "" && c.all {
		return usagef("bee list --help", "bee list: --all and --state cannot go together")
	}
	filter, err := c.filter()
	if err != nil {
		return err
	}
	b, err := c.env.open("list", false)
	if err != nil {
		return err
	}
	defer b.Close()
	records := []actions.Record{}
	for cursor := actions.Cursor(""); ; {
		page, err := b.ListFiltered(ctx, cursor, filter)
		if err != nil {
			return c.env.refusal(ctx, b, "list", "", err)
		}
		if len(page.Records) == 0 {
			break
		}
		records = append(records, page.Records...)
		cursor = page.Cursor
	}
	return c.print(records, b.Location())
}

// filter is the board's filter for the flags: the board filters, so a long
// history of ended actions is not read for the default list.
func (c *ListCommand) filter() (actions.ListFilter, error) {
	var filter actions.ListFilter
	switch st := actions.State(c.state); st {
	case "":
		if !c.all {
			filter.States = []actions.State{actions.Open, actions.Blocked, actions.Claimed}
		}
	case "ended":
		filter.States = []actions.State{actions.Done, actions.Failed, actions.Cancelled}
	case actions.Open, actions.Blocked, actions.Claimed, actions.Done, actions.Failed, actions.Cancelled:
		filter.States = []actions.State{st}
	default:
		return filter, usagef("bee list --state open", "bee list: unknown state %q (open, blocked, claimed, done, failed, cancelled or ended)", c.state)
	}
	return filter, nil
}

// print writes records as JSON or as a table, or says there are none on
// the board at location.
func (c *ListCommand) print(records []actions.Record, location string) error {
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, records)
	}
	if len(records) == 0 {
		what := "no open, blocked or claimed actions (bee list --all shows ended ones too)"
		if c.all {
			what = "no actions"
		} else if c.state != "" {
			what = "no " + c.state + " actions"
		}
		_, err := fmt.Fprintf(out, "%s on %s\n", what, location)
		return err
	}
	now := time.Now()
	tw := newTable(out)
	withPaths := anyPaths(records)
	fmt.Fprintln(tw, "ID\tSTATE\tFOR\tFROM\tHOLDER\tAGE\t"+pathsHead(withPaths)+"TITLE")
	for _, r := range records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", safe(r.ID), safe(string(r.State)), recipient(r.To), safe(r.From), holderCell(r),
			age(now, r.PostedAt), pathsCell(withPaths, r), oneLine(r.Title, 60))
	}
	return tw.Flush()
}

// Usage prints how to use `bee list`.
func (c *ListCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `List the actions on the board, oldest first: by default those that have
not ended (open, blocked or claimed).

Usage:

	bee list [--all | --state STATE] [--json]

STATE is open, blocked (waiting for other actions to be done), claimed,
done, failed, cancelled, or ended (done, failed or cancelled).

Flags:

`)
	printFlags(w, c.flagSet())
}
