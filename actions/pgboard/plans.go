package pgboard

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
)

// The PostgreSQL part of plans (engine.PlanTx, engine.PlanReads). The
// isolation is READ COMMITTED, so what decides whether a waiter opens or
// is cancelled is locked first and read in a later statement, whose
// snapshot sees every transaction that held the lock before:
//
//   - A post locks its prerequisites FOR SHARE, so an end of one waits
//     for the post to commit (and then finds the new waiter), or the post
//     waits for the end (and sees it).
//   - An end locks the waiters FOR UPDATE, in seq order, then judges them:
//     of two ends that each meet a prerequisite of one waiter at once, the
//     second judges after the first has committed, and opens it exactly
//     once.

// addPrerequisites writes the edges of batch, whose actions are recs, in
// one statement.
func (t ptx) addPrerequisites(batch []engine.NewAction, recs []actions.Record) error {
	var seqs, pres []int64
	var ords []int32
	for i, a := range batch {
		for ord, p := range a.After {
			pre := p.Seq
			if pre <= 0 {
				pre = recs[p.Index].Seq
			}
			seqs, pres, ords = append(seqs, recs[i].Seq), append(pres, pre), append(ords, int32(ord))
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	_, err := t.tx.Exec(t.ctx, `INSERT INTO bee_prerequisites (seq, pre, ord)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[])`, seqs, pres, ords)
	return err
}

// readdressBlocked sends the blocked actions addressed to who exactly to
// its agent name (who departs), and returns ids with theirs appended.
// bee_actions_blocked finds them: the open ones' statement walks
// bee_actions_open, which holds no blocked action.
func (t ptx) readdressBlocked(who identity.ID, ids []string) ([]string, error) {
	blocked, err := collectIDs(t.tx.Query(t.ctx, `UPDATE bee_actions SET to_whom = $2, rev = `+xid+`
		WHERE state = 'blocked' AND to_whom = $1 RETURNING seq`, string(who), who.Agent()))
	return append(ids, blocked...), err
}

// Prerequisites implements engine.PlanTx: FOR SHARE, in seq order.
func (t ptx) Prerequisites(seqs []int64) ([]actions.Record, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	recs, err := collect(t.tx.Query(t.ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = ANY($1) ORDER BY seq FOR SHARE`, seqs))
	if err != nil || len(recs) == len(seqs) {
		return recs, err
	}
	// The ended ones, read after the lock as Action does: an end that
	// committed meanwhile is seen here.
	ended, err := collect(t.tx.Query(t.ctx, `SELECT `+endedCols+` FROM bee_ended_actions WHERE seq = ANY($1) ORDER BY seq FOR SHARE`, seqs))
	recs = append(recs, ended...)
	sortBySeq(recs)
	return recs, err
}

// Dependents implements engine.PlanTx: FOR UPDATE, in seq order.
func (t ptx) Dependents(seq int64) ([]int64, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT a.seq FROM bee_actions a
		WHERE a.seq IN (SELECT p.seq FROM bee_prerequisites p WHERE p.pre = $1) AND a.state = 'blocked'
		ORDER BY a.seq FOR UPDATE OF a`, seq)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// OpenReady implements engine.PlanTx.
func (t ptx) OpenReady(seqs []int64) ([]actions.Record, error) {
	recs, err := collect(t.tx.Query(t.ctx, `UPDATE bee_actions a SET state = 'open', rev = `+xid+`
		WHERE a.seq = ANY($1) AND a.state = 'blocked'
		AND NOT EXISTS (SELECT 1 FROM bee_prerequisites p WHERE p.seq = a.seq AND NOT `+preDone+`)
		RETURNING `+recordColsOf("a"), seqs))
	sortBySeq(recs)
	return recs, err
}

// waitingOn is the blocked actions that wait for $1, directly or through
// other blocked actions.
const waitingOn = `WITH RECURSIVE w (seq) AS (
		SELECT p.seq FROM bee_prerequisites p JOIN bee_actions a ON a.seq = p.seq AND a.state = 'blocked' WHERE p.pre = $1
		UNION
		SELECT p.seq FROM w JOIN bee_prerequisites p ON p.pre = w.seq JOIN bee_actions a ON a.seq = p.seq AND a.state = 'blocked')
	SELECT seq FROM w ORDER BY seq`

// Waiting implements engine.PlanTx. It locks the waiters it finds, then
// looks again, in a later statement, until no new one shows: a post that
// added a waiter before a lock was taken has committed by then, and none
// can add one to a locked waiter.
func (t ptx) Waiting(seq int64) ([]engine.Edge, error) {
	var locked []int64
	for {
		rows, err := t.tx.Query(t.ctx, waitingOn, seq)
		if err != nil {
			return nil, err
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, err
		}
		fresh := slices.DeleteFunc(slices.Clone(found), func(s int64) bool { _, in := slices.BinarySearch(locked, s); return in })
		if len(fresh) == 0 {
			break
		}
		// Waiters found after the first look may lock out of seq order; a
		// deadlock with another end is broken by the server and the whole
		// transaction retried (see retryable).
		rows, err = t.tx.Query(t.ctx, `SELECT seq FROM bee_actions WHERE seq = ANY($1) AND state = 'blocked' ORDER BY seq FOR UPDATE`, fresh)
		if err != nil {
			return nil, err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, err
		}
		locked = append(locked, got...)
		slices.Sort(locked)
	}
	if len(locked) == 0 {
		return nil, nil
	}
	return scanEdges(t.tx.Query(t.ctx, `SELECT seq, pre FROM bee_prerequisites
		WHERE seq = ANY($1) AND (pre = $2 OR pre = ANY($1)) ORDER BY seq, ord`, locked, seq))
}

// scanEdges reads the edges (seq, pre) rows hold.
func scanEdges(rows pgx.Rows, err error) ([]engine.Edge, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.Edge, error) {
		var e engine.Edge
		err := row.Scan(&e.Seq, &e.Pre)
		return e, err
	})
}

// CancelBlocked implements engine.PlanTx: one statement for every action.
func (t ptx) CancelBlocked(ends []engine.BlockedEnd, by string) ([]actions.Record, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	seqs := make([]int64, len(ends))
	reasons := make([]string, len(ends))
	for i, e := range ends {
		seqs[i], reasons[i] = e.Seq, e.Reason
	}
	recs, err := collect(t.tx.Query(t.ctx, `UPDATE bee_actions a SET state = 'cancelled', reason = c.reason, ended_by = $3,
			ended_at = `+nowSQL("$4")+`, told_at = (CASE WHEN starts_with(a.from_whom, 'user:') THEN `+nowSQL("$4")+` END), rev = `+xid+`
		FROM unnest($1::bigint[], $2::text[]) AS c (seq, reason)
		WHERE a.seq = c.seq AND a.state = 'blocked'
		RETURNING `+recordColsOf("a"), seqs, reasons, by, t.b.now()))
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	sortBySeq(recs)
	moved := make([]int64, len(recs))
	for i, r := range recs {
		moved[i] = r.Seq
	}
	return recs, t.moveEnded(moved)
}

func sortBySeq(recs []actions.Record) {
	slices.SortFunc(recs, func(a, b actions.Record) int { return cmp.Compare(a.Seq, b.Seq) })
}

// planOf is the seqs of the actions connected to $1 through
// prerequisites, both ways, transitively.
const planOf = `WITH RECURSIVE c (seq) AS (
		SELECT $1::bigint
		UNION
		SELECT CASE WHEN p.seq = c.seq THEN p.pre ELSE p.seq END FROM c JOIN bee_prerequisites p ON p.seq = c.seq OR p.pre = c.seq)
	SELECT seq FROM c`

// PlanOf implements engine.PlanReads, in one read transaction (REPEATABLE
// READ: the actions and their edges as of one moment).
func (s *store) PlanOf(ctx context.Context, seq int64) ([]actions.Record, []engine.Edge, error) {
	var (
		recs  []actions.Record
		edges []engine.Edge
	)
	err := s.b().read(ctx, "plan", func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var err error
			recs, err = collect(tx.Query(ctx, `SELECT `+everyCols+` FROM bee_every_action WHERE seq IN (`+planOf+`) ORDER BY seq`, seq))
			if err != nil || len(recs) == 0 {
				return err
			}
			seqs := make([]int64, len(recs))
			for i, r := range recs {
				seqs[i] = r.Seq
			}
			edges, err = scanEdges(tx.Query(ctx, `SELECT seq, pre FROM bee_prerequisites WHERE seq = ANY($1) ORDER BY seq, ord`, seqs))
			return err
		})
	})
	if err == nil && len(recs) == 0 {
		err = actions.ErrUnknownAction
	}
	return recs, edges, err
}
