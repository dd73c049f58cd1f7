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

// A Row is a record as a page reads it, with the change number (rev) it
// carries on a page of changes; Rev is 0 on other pages.
type Row struct {
	actions.Record
	Rev int64
}

// Read returns the rows of rows, one a row, until rows end or they hold
// MaxBytes: scan reads a row's record, and its rev into the one extra
// destination it is given when withRev is set. It returns scan's error or
// rows'.
func Read(rows Rows, withRev bool, scan func(extra ...any) (actions.Record, error)) ([]Row, error) {
	var out []Row
	size := 0
	for size < MaxBytes && rows.Next() {
		var r Row
		var err error
		if withRev {
			r.Record, err = scan(&r.Rev)
		} else {
			r.Record, err = scan()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		size += Size(r.Record)
	}
	return out, rows.Err()
}

// Page is the page of rows: its records in order, and the cursor cursor
// makes of the last row, or empty when there is none. Its Records is never
// nil.
func Page(rows []Row, empty actions.Cursor, cursor func(Row) actions.Cursor) actions.Page {
	p := actions.Page{Records: make([]actions.Record, 0, len(rows)), Cursor: empty}
	for _, r := range rows {
		p.Records = append(p.Records, r.Record)
	}
	if len(rows) > 0 {
		p.Cursor = cursor(rows[len(rows)-1])
	}
	return p
}
