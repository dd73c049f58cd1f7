// Package pages fills the pages both boards return: records in order, the
// page's cursor after the last, until the rows run out or the page holds
// about MaxBytes of text. A page always holds at least one record when a
// row is there, however large, so paging never stalls.
package pages

import "github.com/tractat-us/bee/actions"

// MaxBytes bounds the text a page carries: a page stops growing once it
// holds this much.
const MaxBytes = 1 << 20

// Size estimates the bytes a record carries, for bounding pages.
func Size(r actions.Record) int {
	return 256 + len(r.To) + len(r.From) + len(r.Title) + len(r.Body) + len(r.Holder) + len(r.Result) + len(r.Reason) + len(r.EndedBy)
}

// Rows is what both database drivers' rows have (database/sql's and
// pgx's).
type Rows interface {
	Next() bool
	Err() error
}

// Fill appends to p the records read scans from rows, one a row, each
// moving p's cursor to the one read returns with it, until rows end or p
// holds MaxBytes; it returns read's error or rows'.
func Fill(p *actions.Page, rows Rows, read func() (actions.Record, actions.Cursor, error)) error {
	size := 0
	for size < MaxBytes && rows.Next() {
		rec, cur, err := read()
		if err != nil {
			return err
		}
		p.Records = append(p.Records, rec)
		p.Cursor = cur
		size += Size(rec)
	}
	return rows.Err()
}
