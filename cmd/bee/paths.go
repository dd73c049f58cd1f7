package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// What bee post, list and show say of the paths an action carries and of
// what holds it back.

// withPaths sets the paths --paths names, in --repo's repository (else the
// working directory's), on d; without --paths it leaves d as it is.
func (c *PostCommand) withPaths(d *actions.Draft) error {
	if c.paths == "" {
		if c.repo != "" {
			return usagef("bee post --paths 'src/auth/**' --repo DIR TITLE", "bee post: --repo says where --paths are; give --paths too")
		}
		return nil
	}
	var paths []string
	for p := range strings.SplitSeq(c.paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return usagef("bee post --paths 'src/auth/**,docs/auth.md' TITLE", "bee post: --paths names no pattern")
	}
	name, err := c.env.repoName("post", c.repo)
	if err != nil {
		return err
	}
	d.Repo, d.Paths = name, paths
	return nil
}

// heldBackLine says, after a line about rec, who holds it back: "" when
// nobody does.
func heldBackLine(rec actions.Record) string {
	if len(rec.HeldBackBy) == 0 {
		return ""
	}
	return "\nheld back: " + heldBack(rec) + "; nobody takes it until that is released"
}

// heldBack says who holds rec back: "agent:x#1a2b3c4d holds src/auth/**
// (r-3)", and how many more.
func heldBack(rec actions.Record) string {
	h := rec.HeldBackBy[0]
	s := fmt.Sprintf("%s holds %s (%s)", safe(h.Holder), safe(h.Pattern), safe(h.Reservation))
	if n := len(rec.HeldBackBy) - 1; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// anyPaths reports whether any of records carries paths: then a table of
// them has a PATHS column.
func anyPaths(records []actions.Record) bool {
	for _, r := range records {
		if len(r.Paths) > 0 {
			return true
		}
	}
	return false
}

// pathsHead is the PATHS column's head, when the table has one.
func pathsHead(with bool) string {
	if !with {
		return ""
	}
	return "PATHS\t"
}

// pathsCell is r's PATHS cell, when the table has the column.
func pathsCell(with bool, r actions.Record) string {
	if !with {
		return ""
	}
	return oneLine(orDash(strings.Join(r.Paths, " ")), 40) + "\t"
}

// viewed is rec, just posted, as views show it: a board fills HeldBackBy
// in its views (Get, List), not in the answer to a post. An action
// without paths is never held back, and one that cannot be read again is
// shown as posted.
func viewed(ctx context.Context, b actions.Board, rec actions.Record) actions.Record {
	if len(rec.Paths) == 0 || len(rec.HeldBackBy) > 0 {
		return rec
	}
	if r, err := b.Get(ctx, rec.ID); err == nil {
		return r
	}
	return rec
}
