package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tractat-us/bee/actions"
)

// InboxCommand is `bee inbox`: the questions that wait for the person
// running it (actions addressed to user:<name> or to people), oldest
// first; with --watch, each new one as it arrives, with the terminal bell.
type InboxCommand struct {
	env *env

	as     string
	watch  bool
	asJSON bool
}

func (c *InboxCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("inbox")
	fs.StringVar(&c.as, "as", "", "the person whose inbox it is (default $USER)")
	fs.BoolVar(&c.watch, "watch", false, "keep watching: print each new question as it arrives and ring the terminal bell, until interrupted")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the questions (with --watch, one JSON object per line, and no bell)")
	return fs
}

// bell is the terminal bell (BEL), rung for each new question --watch
// prints.
const bell = "\a"

// Run lists the person's questions, or watches for new ones.
func (c *InboxCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee inbox --help", "bee inbox: unexpected argument %q", fs.Arg(0))
	}
	who, err := c.env.personAs("inbox", c.as)
	if err != nil {
		return err
	}
	b, err := c.env.open("inbox", c.watch)
	if err != nil {
		return err
	}
	defer b.Close()
	if c.watch {
		return c.watchFor(ctx, b, who)
	}
	qs, err := questions(ctx, b, who)
	if err != nil {
		return c.env.refusal(ctx, b, "inbox", "", err)
	}
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, qs)
	}
	if len(qs) == 0 {
		_, err := fmt.Fprintf(out, "nothing waits for %s on %s\n", safe(string(who)), b.Location())
		return err
	}
	now := time.Now()
	tw := newTable(out)
	fmt.Fprintln(tw, "ID\tFROM\tSINCE\tFOR\tTITLE")
	for _, r := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", safe(r.ID), safe(r.From), age(now, r.PostedAt), forWhom(r, who), oneLine(r.Title, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, "\nbee show ID reads a question in full; bee answer ID TEXT answers it; bee decline ID --reason TEXT declines it.")
	return err
}

// watchFor prints the questions waiting for who now, then each new one as
// it arrives, with the bell, until ctx ends; it then returns
// errInterrupted. A question seen once is not printed again; one that
// leaves the inbox (answered, declined, cancelled, sent elsewhere) gets a
// line saying so.
func (c *InboxCommand) watchFor(ctx context.Context, b actions.Board, who actions.Poster) error {
	cursor, err := b.Head(ctx)
	if err != nil {
		return c.env.refusal(ctx, b, "inbox", "", err)
	}
	qs, err := questions(ctx, b, who)
	if err != nil {
		return c.env.refusal(ctx, b, "inbox", "", err)
	}
	fmt.Fprintf(c.env.main.Stderr, "watching %s for questions to %s; interrupt (Ctrl-C) to stop\n", b.Location(), safe(string(who)))
	out := c.env.main.Stdout
	seen := map[string]bool{}
	for _, r := range qs {
		seen[r.ID] = true
		if err := c.printNew(out, r, who); err != nil {
			return err
		}
	}
	for {
		page, err := b.Changes(ctx, cursor, watchPoll)
		if ctx.Err() != nil {
			return errInterrupted
		}
		if err != nil {
			return c.env.refusal(ctx, b, "inbox", "", err)
		}
		for _, r := range page.Records {
			var err error
			switch asked := actions.AskedOf(r, who); {
			case asked && !seen[r.ID]:
				seen[r.ID] = true
				err = c.printNew(out, r, who)
			case !asked && seen[r.ID]:
				delete(seen, r.ID)
				err = c.printGone(out, r)
			}
			if err != nil {
				return err
			}
		}
		cursor = page.Cursor
	}
}

// printNew prints a question: a JSON line with --json, else a line with
// the bell.
func (c *InboxCommand) printNew(w io.Writer, r actions.Record, who actions.Poster) error {
	if c.asJSON {
		return writeJSONLine(w, r)
	}
	_, err := fmt.Fprintf(w, "%s%s  %s asks %s: %s  (bee answer %s TEXT)\n", bell,
		time.Now().Format("15:04:05"), safe(r.From), forWhom(r, who), oneLine(r.Title, 80), safe(r.ID))
	return err
}

// printGone says that a question left the inbox, and how.
func (c *InboxCommand) printGone(w io.Writer, r actions.Record) error {
	if c.asJSON {
		return writeJSONLine(w, r)
	}
	what := describe(r)
	if !r.State.Ended() {
		what = "now for " + recipient(r.To)
	}
	_, err := fmt.Fprintf(w, "%s  %s is no longer waiting: %s\n", time.Now().Format("15:04:05"), safe(r.ID), what)
	return err
}

// forWhom says to whom a question of who's inbox is addressed: "you", or
// "people" (any person).
func forWhom(r actions.Record, who actions.Poster) string {
	if r.To == string(who) {
		return "you"
	}
	return safe(r.To)
}

// questions returns the open actions that wait for who, oldest first.
func questions(ctx context.Context, b actions.Board, who actions.Poster) ([]actions.Record, error) {
	qs := []actions.Record{}
	for cursor := actions.Cursor(""); ; {
		page, err := b.ListFiltered(ctx, cursor, actions.ListFilter{States: []actions.State{actions.Open}})
		if err != nil {
			return nil, err
		}
		if len(page.Records) == 0 {
			return qs, nil
		}
		for _, r := range page.Records {
			if actions.AskedOf(r, who) {
				qs = append(qs, r)
			}
		}
		cursor = page.Cursor
	}
}

// Usage prints how to use `bee inbox`.
func (c *InboxCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `List the questions that wait for you, oldest first: the actions agents
(or people) addressed to you, user:$USER, or to people, any person. Each
line says who asks and since when. Answer one with bee answer, decline it
with bee decline; the agent that asked is woken with the outcome.

With --watch it keeps watching, for a spare terminal: it prints what waits
now, then each new question as it arrives, ringing the terminal bell, until
interrupted (Ctrl-C; bee then exits 130).

Usage:

	bee inbox [--as NAME] [--watch] [--json]

Flags:

`)
	printFlags(w, c.flagSet())
}
