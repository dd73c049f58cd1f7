package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/tractat-us/bee/actions"
)

// WaitCommand is `bee wait`: it blocks until the given actions have ended,
// for scripts and CI.
type WaitCommand struct {
	env *env

	timeout time.Duration
	asJSON  bool
}

// waitChunk bounds one Await call; bee wait loops over them until every
// action has ended or --timeout has passed.
const waitChunk = time.Minute

func (c *WaitCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("wait")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up after this long (e.g. 90s, 10m; default: wait as long as it takes)")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the ended actions at the end")
	return fs
}

// An exitError ends bee with its own exit status, after its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Run waits for every action named to end. It returns nil when all are
// done, an *exitError with status 1 when any failed or was cancelled, and
// one with status 2 when the timeout passed first.
func (c *WaitCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	ids := fs.Args()
	if len(ids) == 0 {
		return usagef("bee wait a-7 a-8", "bee wait: no action ids given")
	}
	if c.timeout < 0 {
		return usagef("bee wait --timeout 10m ID", "bee wait: --timeout must be positive")
	}
	who, _ := c.env.person("wait", "") // only to record that its poster heard; none is fine
	b, err := c.env.open(false)
	if err != nil {
		return err
	}
	defer b.Close()

	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	out := c.env.main.Stdout
	pending := slices.Clone(ids)
	var ended []actions.Record
	for len(pending) > 0 {
		chunk := waitChunk
		if !deadline.IsZero() {
			chunk = min(chunk, time.Until(deadline))
			if chunk <= 0 {
				break
			}
		}
		recs, err := b.Await(ctx, who, pending, chunk)
		switch {
		case errors.Is(err, context.Canceled):
			return &exitError{code: 2, msg: fmt.Sprintf("bee wait: interrupted; still waiting for %v", pending)}
		case errors.Is(err, actions.ErrUnknownAction):
			return usagef("bee list --all", "bee wait: %v", err)
		case err != nil:
			return fmt.Errorf("bee wait: %w", err)
		}
		for _, r := range recs {
			pending = slices.DeleteFunc(pending, func(id string) bool { return id == r.ID })
			ended = append(ended, r)
			if !c.asJSON {
				fmt.Fprintln(out, endedLine(r))
			}
		}
	}
	if c.asJSON {
		if ended == nil {
			ended = []actions.Record{}
		}
		if err := writeJSON(out, ended); err != nil {
			return err
		}
	}
	if len(pending) > 0 {
		return &exitError{code: 2, msg: fmt.Sprintf("bee wait: timed out after %v; still not ended: %v", c.timeout, pending)}
	}
	for _, r := range ended {
		if r.State != actions.Done {
			return &exitError{code: 1, msg: fmt.Sprintf("bee wait: %s %s", r.ID, r.State)}
		}
	}
	return nil
}

// endedLine says in one line how an action ended, for people.
func endedLine(r actions.Record) string {
	line := fmt.Sprintf("%s %s by %s", safe(r.ID), safe(string(r.State)), orDash(r.EndedBy))
	switch {
	case r.State == actions.Done && r.Result != "":
		line += ": " + oneLine(r.Result, 200)
	case r.Reason != "":
		line += ": " + oneLine(r.Reason, 200)
	}
	return line
}

// Usage prints how to use `bee wait`.
func (c *WaitCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Wait until every action named has ended (done, failed or cancelled),
printing a line for each as it ends. For scripts and CI:

	exit 0   all done
	exit 1   any failed or was cancelled
	exit 2   --timeout passed first, or the command line was wrong

Usage:

	bee wait [--timeout DURATION] [--json] ID...

Flags:

`)
	printFlags(w, c.flagSet())
}
