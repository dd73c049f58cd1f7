package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/termtext"
	"github.com/tractat-us/bee/internal/textcut"
)

// writeJSON writes v as indented JSON and a newline, with the characters
// a terminal would act on escaped (see termtext.JSON).
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termtext.JSON(b), '\n'))
	return err
}

// writeJSONLine writes v as one line of JSON, escaped as by writeJSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(termtext.JSON(b), '\n'))
	return err
}

// printRecord prints the action a command changed: as indented JSON with
// --json, else line.
func (e *env) printRecord(asJSON bool, rec actions.Record, line string) error {
	if asJSON {
		return writeJSON(e.main.Stdout, rec)
	}
	_, err := fmt.Fprintln(e.main.Stdout, line)
	return err
}

// newTable returns a tabwriter for a table of columns separated by \t.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// Every string from the board (titles, bodies, results, ids, session ids)
// goes through package termtext before a person sees it: any agent can
// post escape sequences, and a terminal would act on them. --json keeps
// the text exactly, with those characters as JSON escapes.

// safe makes board text one inert line; see termtext.Line.
func safe(s string) string { return termtext.Line(s) }

// recipient says whom an action is for, for people.
func recipient(to string) string {
	if to == "" {
		return "anyone"
	}
	return safe(to)
}

// orDash shows an empty value as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return safe(s)
}

// oneLine makes s fit one table cell: controls shown escaped (a tab as a
// space), and cut to at most n characters.
func oneLine(s string, n int) string {
	return textcut.RunesWithin(safe(s), n)
}

// age says how long ago t was, compactly: "12s", "3m", "5h", "2d".
func age(now, t time.Time) string {
	return span(now.Sub(t))
}

// span writes a duration compactly, rounded down to its largest unit.
func span(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + span(-d)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// stamp writes a time for people: local, to the second.
func stamp(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

// describe says where an action stands, for people: "open", "claimed by
// agent:x#12345678", "done by agent:x#12345678", "cancelled by user:ann",
// "blocked by a-2, a-3".
func describe(r actions.Record) string {
	switch r.State {
	case actions.Claimed:
		if r.HolderGone {
			return "claimed by " + safe(r.Holder) + " (gone: its process died; the claim goes back to open)"
		}
		return "claimed by " + safe(r.Holder)
	case actions.Done, actions.Failed, actions.Cancelled:
		if r.EndedBy != "" {
			return safe(string(r.State)) + " by " + safe(r.EndedBy)
		}
	case actions.Blocked:
		if len(r.BlockedBy) > 0 {
			return "blocked by " + safe(strings.Join(r.BlockedBy, ", "))
		}
	}
	return safe(string(r.State))
}

// holderCell is the HOLDER column of a table: who holds (or last held) the
// action, marked when the holder is gone.
func holderCell(r actions.Record) string {
	switch {
	case r.HolderGone:
		return safe(r.Holder) + " (gone)"
	case r.State == actions.Open && len(r.HeldBackBy) > 0:
		return "held back by " + safe(r.HeldBackBy[0].Holder)
	}
	return orDash(r.Holder)
}
