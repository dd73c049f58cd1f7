package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// PlanCommand is `bee plan`: the plan an action belongs to, as a tree.
type PlanCommand struct {
	env *env

	asJSON bool
}

func (c *PlanCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("plan")
	fs.BoolVar(&c.asJSON, "json", false, "print the plan as a JSON graph: {records, edges}, each edge {before, after}")
	return fs
}

// Run prints the plan of the action args names.
func (c *PlanCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() != 1 {
		return usagef("bee plan a-7", "bee plan: want one action id, got %d arguments", fs.NArg())
	}
	b, err := c.env.open("plan", false)
	if err != nil {
		return err
	}
	defer b.Close()
	id := fs.Arg(0)
	g, err := b.Plan(ctx, id)
	if err != nil {
		return c.env.refusal(ctx, b, "plan", id, err)
	}
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, g)
	}
	fmt.Fprintf(out, "plan of %s on %s: %s\n", safe(id), b.Location(), planSummary(g.Records))
	return printTree(out, g, id)
}

// planSummary counts a plan's actions by state: "4 actions: 1 done, 1
// claimed, 2 blocked".
func planSummary(recs []actions.Record) string {
	count := map[actions.State]int{}
	for _, r := range recs {
		count[r.State]++
	}
	var parts []string
	for _, st := range []actions.State{actions.Done, actions.Claimed, actions.Open, actions.Blocked, actions.Failed, actions.Cancelled} {
		if n := count[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Sprintf("%d %s: %s", len(recs), plural(len(recs), "action", "actions"), strings.Join(parts, ", "))
}

// printTree writes the plan g as a tree: each action that waits for
// nothing in the plan at the left, the actions that wait for it below it,
// indented. An action that waits for several is drawn in full under the
// first of them and named as "(shown above)" under the others. mark is
// the action asked about, marked with an arrow.
func printTree(w io.Writer, g actions.PlanGraph, mark string) error {
	byID := make(map[string]actions.Record, len(g.Records))
	order := make(map[string]int, len(g.Records))
	for i, r := range g.Records {
		byID[r.ID] = r
		order[r.ID] = i
	}
	dependents := map[string][]string{}
	waits := map[string]bool{}
	for _, e := range g.Edges {
		if _, ok := byID[e.After]; !ok {
			continue
		}
		if _, ok := byID[e.Before]; !ok {
			continue
		}
		dependents[e.Before] = append(dependents[e.Before], e.After)
		waits[e.After] = true
	}
	for _, ds := range dependents {
		slices.SortFunc(ds, func(a, b string) int { return cmp.Compare(order[a], order[b]) })
	}
	shown := map[string]bool{}
	var b strings.Builder
	var walk func(id, lead, branch string)
	walk = func(id, lead, branch string) {
		b.WriteString(lead + branch)
		if shown[id] {
			fmt.Fprintf(&b, "%s (shown above)\n", safe(id))
			return
		}
		shown[id] = true
		b.WriteString(treeNode(byID[id], id == mark))
		b.WriteByte('\n')
		next := lead
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		ds := dependents[id]
		for i, d := range ds {
			if i == len(ds)-1 {
				walk(d, next, "└─ ")
			} else {
				walk(d, next, "├─ ")
			}
		}
	}
	for _, r := range g.Records {
		if !waits[r.ID] {
			walk(r.ID, "", "")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// treeNode is one action as a line of the tree: "a-2 [claimed by
// agent:w#1a2b3c4d] Update the API (for worker)".
func treeNode(r actions.Record, marked bool) string {
	line := fmt.Sprintf("%s [%s] %s", safe(r.ID), describe(r), oneLine(r.Title, 60))
	if r.To != "" {
		line += " (for " + safe(r.To) + ")"
	}
	if (r.State == actions.Failed || r.State == actions.Cancelled) && r.Reason != "" {
		line += ": " + oneLine(r.Reason, 80)
	}
	if marked {
		line += "  <-"
	}
	return line
}

// A planLink is an action a shown action waits for, or that waits for it.
type planLink struct {
	ID    string        `json:"id"`
	State actions.State `json:"state"`
	Title string        `json:"title"`
}

// planLinksOf are the prerequisites and dependents of a shown action.
type planLinksOf struct {
	Prerequisites []planLink `json:"prerequisites,omitempty"`
	Dependents    []planLink `json:"dependents,omitempty"`
}

// shownAction is what `bee show --json` prints: the record, and the
// states of the actions it waits for and that wait for it.
type shownAction struct {
	actions.Record
	planLinksOf
}

// planLinks returns r's prerequisites, in r.After's order, and its
// dependents, in posting order, as the board has them now.
func planLinks(ctx context.Context, b actions.Board, r actions.Record) (planLinksOf, error) {
	g, err := b.Plan(ctx, r.ID)
	if err != nil {
		return planLinksOf{}, err
	}
	byID := make(map[string]actions.Record, len(g.Records))
	for _, p := range g.Records {
		byID[p.ID] = p
	}
	link := func(id string) planLink {
		p, ok := byID[id]
		if !ok {
			return planLink{ID: id}
		}
		return planLink{ID: p.ID, State: p.State, Title: p.Title}
	}
	var out planLinksOf
	for _, id := range r.After {
		out.Prerequisites = append(out.Prerequisites, link(id))
	}
	waits := map[string]bool{}
	for _, e := range g.Edges {
		if e.Before == r.ID {
			waits[e.After] = true
		}
	}
	for _, p := range g.Records {
		if waits[p.ID] {
			out.Dependents = append(out.Dependents, link(p.ID))
		}
	}
	return out, nil
}

// print writes the prerequisites and dependents for `bee show`, nothing
// when there are none.
func (l planLinksOf) print(w io.Writer) error {
	for _, part := range []struct {
		head  string
		links []planLink
	}{
		{"prerequisites (it waits for these to be done)", l.Prerequisites},
		{"dependents (these wait for it)", l.Dependents},
	} {
		if len(part.links) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", part.head)
		tw := newTable(w)
		for _, p := range part.links {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", safe(p.ID), orDash(string(p.State)), oneLine(p.Title, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// Usage prints how to use `bee plan`.
func (c *PlanCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Show the plan an action belongs to: every action it waits for or that waits
for it, directly or through others, as a tree. Each action that waits for
nothing in the plan starts a branch, and the actions that wait for it hang
below it, with their states; the action named is marked with <-.

Usage:

	bee plan [--json] ID

Flags:

`)
	printFlags(w, c.flagSet())
}
