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

// recordCols are the columns scanRecord reads, in order, of a row of
// bee_actions (see recordColsOf).
var recordCols = recordColsOf("bee_actions")

// recordColsOf is the columns scanRecord reads of the table aliased alias:
// the last two are the action's prerequisites as given and, while it is
// blocked, those not yet done, each read with index lookups (the primary
// keys: a correlated subquery rather than a join, which the planner might
// hash over every action) on the page's own statement.
func recordColsOf(alias string) string {
	cols := strings.Split(`seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, ended_at, repo, paths, priority`, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ") + `,
		ARRAY(SELECT p.pre FROM bee_prerequisites p WHERE p.seq = ` + alias + `.seq ORDER BY p.ord),
		CASE WHEN ` + alias + `.state = 'blocked' THEN ARRAY(SELECT p.pre FROM bee_prerequisites p
			WHERE p.seq = ` + alias + `.seq AND NOT ` + preDone + ` ORDER BY p.ord) END`
}

// everyCols are recordCols of a row of bee_every_action.
var everyCols = recordColsOf("bee_every_action")

// endedCols are recordCols of a row of bee_ended_actions.
var endedCols = recordColsOf("bee_ended_actions")

// preDone says that the prerequisite p.pre has ended done (see
// endedMigration).
const preDone = `EXISTS (SELECT 1 FROM bee_ended_actions d WHERE d.seq = p.pre AND d.state = 'done')`

// xid is the id of the current transaction, as the rev it writes.
const xid = `pg_current_xact_id()::text::bigint`

func scanRecord(row pgx.Row, extra ...any) (actions.Record, error) {
	var (
		r                  actions.Record
		state              string
		posted             time.Time
		claimedAt, endedAt *time.Time
		priority           int16
		after, blockedBy   []int64
	)
	dest := append([]any{&r.Seq, &r.To, &r.From, &r.Title, &r.Body, &state, &r.Holder, &r.Result, &r.Reason, &r.EndedBy,
		&posted, &claimedAt, &endedAt, &r.Repo, &r.Paths, &priority, &after, &blockedBy}, extra...)
	if err := row.Scan(dest...); err != nil {
		return actions.Record{}, err
	}
	if len(r.Paths) == 0 {
		r.Paths = nil
	}
	r.ID = position.ActionID(r.Seq)
	r.Priority = int(priority)
	r.After, r.BlockedBy = seqIDs(after), seqIDs(blockedBy)
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

// seqIDs turns seqs into action ids; nil for none.
func seqIDs(seqs []int64) []string {
	if len(seqs) == 0 {
		return nil
	}
	ids := make([]string, len(seqs))
	for i, s := range seqs {
		ids[i] = position.ActionID(s)
	}
	return ids
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
