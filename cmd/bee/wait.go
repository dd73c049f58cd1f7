package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
)

// WaitCommand is `bee wait`: it blocks until the given actions have ended,
// for scripts and CI.
type WaitCommand struct {
	env *env

	timeout timeoutFlag
	asJSON  bool
}

// waitChunk bounds one Await call; bee wait loops over them until every
// action has ended or --timeout has passed.
const waitChunk = time.Minute

func (c *WaitCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("wait")
	fs.Var(&c.timeout, "timeout", "give up after this long (e.g. 90s, 10m) and exit 124; 0 looks once without waiting (default: wait as long as it takes)")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the ended actions at the end")
	return fs
}

// A timeoutFlag is --timeout: a duration, and whether it was given, since
// 0 (look once) is not the default (wait as long as it takes).
type timeoutFlag struct {
	d   time.Duration
	set bool
}

func (f *timeoutFlag) String() string {
	if !f.set {
		return ""
	}
	return f.d.String()
}

func (f *timeoutFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration (90s, 10m, 1h30m)")
	}
	f.d, f.set = d, true
	return nil
}

// Run waits for every action named to end. It returns nil when all are
// done, a *cliError with exit code 1 when any failed or was cancelled or
// the board knows no such action, and one with exit code 124 when the
// timeout passed first. --timeout 0 looks once and does not wait.
func (c *WaitCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	ids := fs.Args()
	if len(ids) == 0 {
		return usagef("bee wait a-7 a-8", "bee wait: no action ids given")
	}
	if c.timeout.d < 0 {
		return usagef("bee wait --timeout 10m ID (or --timeout 0 to look once without waiting)", "bee wait: --timeout %v is negative", c.timeout.d)
	}
	who, _ := c.env.person("wait", "") // only to record that its poster heard; none is fine
	var deadline time.Time
	if c.timeout.set {
		deadline = time.Now().Add(c.timeout.d)
	}
	var openBy time.Time // --timeout bounds opening too: a silent server cannot hold bee wait past it
	switch {
	case c.timeout.d > 0:
		openBy = deadline
	case c.timeout.set:
		// --timeout 0 looks once: opening and the look end by
		// lookOnceBound, not by a server's connect timeout (10 s).
		openBy = time.Now().Add(lookOnceBound)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, openBy)
		defer cancel()
	}
	b, err := c.env.openBy("wait", false, openBy)
	if err != nil {
		return err
	}
	defer b.Close()

	w := &waited{pending: slices.Clone(ids), out: c.env.main.Stdout, asJSON: c.asJSON}
	if c.timeout.set && c.timeout.d == 0 {
		recs, err := c.look(ctx, b, ids)
		if err != nil {
			return err
		}
		w.report(recs)
	}
	if err := c.await(ctx, b, who, deadline, w); err != nil {
		return err
	}
	return c.verdict(w)
}

// waited is what bee wait has heard: the ids not ended yet, and the
// records of those that ended, in the order they ended.
type waited struct {
	pending []string
	ended   []actions.Record
	out     io.Writer // where each end is said as it comes, unless asJSON
	asJSON  bool
}

// report takes in recs, ended.
func (w *waited) report(recs []actions.Record) {
	for _, r := range recs {
		w.pending = slices.DeleteFunc(w.pending, func(id string) bool { return id == r.ID })
		w.ended = append(w.ended, r)
		if !w.asJSON {
			fmt.Fprintln(w.out, endedLine(r))
		}
	}
}

// await waits, a chunk at a time, until every pending action has ended or
// deadline (if not zero) has passed.
func (c *WaitCommand) await(ctx context.Context, b actions.Board, who actions.Poster, deadline time.Time, w *waited) error {
	for len(w.pending) > 0 {
		chunk := waitChunk
		if !deadline.IsZero() {
			chunk = min(chunk, time.Until(deadline))
			if chunk <= 0 {
				return nil
			}
		}
		recs, err := b.Await(ctx, who, w.pending, chunk)
		switch {
		case ctx.Err() != nil:
			return &cliError{code: exitInterrupted, err: err,
				msg: "bee wait: interrupted; still waiting for " + strings.Join(w.pending, " ")}
		case errors.Is(err, actions.ErrUnknownAction):
			return c.unknown(ctx, b, w.pending, err)
		case err != nil:
			return c.env.refusal(ctx, b, "wait", "", err)
		}
		w.report(recs)
	}
	return nil
}

// verdict prints --json's array, then says how the wait ended: nil when
// every action is done, exit 124 when some had not ended by the timeout,
// 1 when some ended otherwise.
func (c *WaitCommand) verdict(w *waited) error {
	if c.asJSON {
		ended := w.ended
		if ended == nil {
			ended = []actions.Record{}
		}
		if err := writeJSON(w.out, ended); err != nil {
			return err
		}
	}
	if len(w.pending) > 0 {
		return &cliError{code: exitTimeout,
			msg:  fmt.Sprintf("bee wait: --timeout %v passed; not ended yet: %s", c.timeout.d, strings.Join(w.pending, " ")),
			hint: "bee wait again, with a longer --timeout (or none, to wait as long as it takes)"}
	}
	var bad []string
	for _, r := range w.ended {
		if r.State != actions.Done {
			bad = append(bad, r.ID+" "+string(r.State))
		}
	}
	if len(bad) > 0 {
		return &cliError{code: exitNo, msg: "bee wait: not all done: " + strings.Join(bad, ", "), hint: "bee show ID says why"}
	}
	return nil
}

// lookOnceBound bounds bee wait --timeout 0, opening included: as long
// as a write waits for a file board's lock.
const lookOnceBound = 5 * time.Second

// look is --timeout 0: the ended actions among ids, looked at once.
func (c *WaitCommand) look(ctx context.Context, b actions.Board, ids []string) ([]actions.Record, error) {
	var recs []actions.Record
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := b.Get(ctx, id)
		if err != nil {
			return nil, c.env.refusal(ctx, b, "wait", id, err)
		}
		if r.State.Ended() {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// unknown says which of ids the board does not know, given Await's err.
func (c *WaitCommand) unknown(ctx context.Context, b actions.Board, ids []string, err error) error {
	for _, id := range ids {
		if _, gerr := b.Get(ctx, id); errors.Is(gerr, actions.ErrUnknownAction) {
			return c.env.refusal(ctx, b, "wait", id, gerr)
		}
	}
	return c.env.refusal(ctx, b, "wait", "", err)
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

	exit 0    all done
	exit 1    any failed or was cancelled, or the board knows no such action
	exit 2    the command line is wrong
	exit 124  --timeout passed before every action ended
	exit 130  interrupted (Ctrl-C)

Without --timeout it waits as long as it takes. --timeout 0 looks once and
does not wait: exit 0 when all are done already, 124 when any has not
ended yet. A negative --timeout is refused.

Usage:

	bee wait [--timeout DURATION] [--json] ID...

Flags:

`)
	printFlags(w, c.flagSet())
}
