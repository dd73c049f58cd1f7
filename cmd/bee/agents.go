package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/ancestry"
)

// AgentsCommand is `bee agents`: the live identities and what they hold.
type AgentsCommand struct {
	env *env

	asJSON bool
}

func (c *AgentsCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("agents")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of the live identities")
	return fs
}

// Run lists the live identities: joined, not departed, and within their
// lease or with their process still running.
func (c *AgentsCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee agents --help", "bee agents: unexpected argument %q", fs.Arg(0))
	}
	b, err := c.env.open("agents", false)
	if err != nil {
		return err
	}
	defer b.Close()
	members, err := b.Members(ctx)
	if err != nil {
		return c.env.refusal(ctx, b, "agents", "", err)
	}

	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, members)
	}
	if len(members) == 0 {
		_, err := fmt.Fprintf(out, "no live agents on %s\n", b.Location())
		return err
	}
	now := time.Now()
	tw := newTable(out)
	fmt.Fprintln(tw, "IDENTITY\tCLIENT\tPID\tCLAUDE PID\tSESSION\tJOINED\tLEASE\tWAITER\tHOLDING")
	for _, m := range members {
		claude := "-"
		if m.ClaudePID != 0 {
			claude = strconv.Itoa(m.ClaudePID)
		}
		lease := "idle"
		if left := m.LeaseUntil.Sub(now); left > 0 {
			lease = span(left) + " left"
		}
		waiter := "-"
		if m.WaiterSince != nil {
			waiter = "armed " + age(now, *m.WaiterSince)
		}
		pid := strconv.Itoa(m.PID)
		if m.Host != "" { // a board shared across machines: whose pid
			pid += "@" + safe(m.Host)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s ago\t%s\t%s\t%s\n", safe(string(m.ID)), orDash(clientTitle(m.Client)), pid, claude, orDash(m.SessionID),
			age(now, m.JoinedAt), lease, waiter, orDash(strings.Join(m.Holding, " ")))
	}
	return tw.Flush()
}

// Usage prints how to use `bee agents`.
func (c *AgentsCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `List the live agent identities (joined, not departed, and within their lease
or with their process still running), their processes and the actions each
holds. An idle identity's lease is not renewed, so it may show as run out.
WAITER says whether the session's wake-on-work waiter is armed, and since
when: "armed 5m" means an idle session that bee wakes when work arrives; "-"
means none is armed (the session is working, runs headless, or lost its
waiter and hears of new work only when it asks, until its next turn ends).

Usage:

	bee agents [--json]

Flags:

`)
	printFlags(w, c.flagSet())
}

// clientTitle is the name people know the agent CLI client by ("Codex
// CLI"), or client itself when bee does not know it.
func clientTitle(client string) string {
	if t := ancestry.Client(client).Title(); t != "" {
		return t
	}
	return safe(client)
}
