package pgboard

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
)

// recordCols are the columns scanRecord reads, in order.
const recordCols = `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, ended_at, repo, paths`

// recordColsOf is recordCols of the table aliased alias.
func recordColsOf(alias string) string {
	cols := strings.Split(recordCols, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// xid is the id of the current transaction, as the rev it writes.
const xid = `pg_current_xact_id()::text::bigint`

func scanRecord(row pgx.Row, extra ...any) (actions.Record, error) {
	var (
		r                  actions.Record
		state              string
		posted             time.Time
		claimedAt, endedAt *time.Time
	)
	dest := append([]any{&r.Seq, &r.To, &r.From, &r.Title, &r.Body, &state, &r.Holder, &r.Result, &r.Reason, &r.EndedBy,
		&posted, &claimedAt, &endedAt, &r.Repo, &r.Paths}, extra...)
	if err := row.Scan(dest...); err != nil {
		return actions.Record{}, err
	}
	if len(r.Paths) == 0 {
		r.Paths = nil
	}
	r.ID = position.ActionID(r.Seq)
	r.State = actions.State(state)
	r.PostedAt = posted.UTC()
	if claimedAt != nil {
		t := claimedAt.UTC()
		r.ClaimedAt = &t
	}
	if endedAt != nil {
		t := endedAt.UTC()
		r.EndedAt = &t
	}
	return r, nil
}

// noRows maps pgx's "no rows" for one action to the contract's
// actions.ErrUnknownAction, unwrapped (see engine.Store): the one place the
// PostgreSQL board does.
func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return actions.ErrUnknownAction
	}
	return err
}

// collect scans every row of rows as a record.
func collect(rows pgx.Rows, err error) ([]actions.Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []actions.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// cursors makes and reads this board's cursors.
func (b *Board) cursors() position.Cursors { return position.Cursors{ID: b.id, Where: b.location} }
