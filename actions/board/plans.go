package board

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/identity"
)

// The file's part of plans (engine.PlanTx, engine.PlanReads). Writes are
// serialized by the write lock, so what a transaction reads stays as it
// read it until it commits: nothing here locks rows.

// addPrerequisites writes the edges of batch, whose actions are recs, in
// one statement.
func (t wtx) addPrerequisites(batch []engine.NewAction, recs []actions.Record) error {
	var edges [][3]int64 // seq, pre, ord
	for i, a := range batch {
		for ord, p := range a.After {
			pre := p.Seq
			if pre <= 0 {
				pre = recs[p.Index].Seq
			}
			edges = append(edges, [3]int64{recs[i].Seq, pre, int64(ord)})
		}
	}
	if len(edges) == 0 {
		return nil
	}
	data, err := json.Marshal(edges)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO prerequisites (seq, pre, ord)
		SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?)`, string(data))
	return err
}

// readdressBlocked sends the blocked actions addressed to who exactly to
// its agent name (who departs), at rev, and returns ids with theirs
// appended. actions_blocked finds them: the open ones' statement walks
// actions_open, which holds no blocked action.
func (t wtx) readdressBlocked(who identity.ID, rev int64, ids []string) ([]string, error) {
	blocked, err := collectIDs(t.rows(`UPDATE actions SET to_whom = ?, rev = ?
		WHERE state = 'blocked' AND to_whom = ? RETURNING seq`, who.Agent(), rev, string(who)))
	return append(ids, blocked...), err
}

// Prerequisites implements engine.PlanTx.
func (t wtx) Prerequisites(seqs []int64) ([]actions.Record, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return t.records(`SELECT `+everyCols+` FROM every_action WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq`, seqList(seqs))
}

// records reads the records query returns.
func (t wtx) records(query string, args ...any) ([]actions.Record, error) {
	rows, err := t.rows(query, args...)
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

// dependentsSQL is Dependents' statement: ? is the prerequisite's seq.
const dependentsSQL = `SELECT a.seq FROM prerequisites p JOIN actions a ON a.seq = p.seq
		WHERE p.pre = ? AND a.state = 'blocked' ORDER BY a.seq`

// Dependents implements engine.PlanTx.
func (t wtx) Dependents(seq int64) ([]int64, error) {
	rows, err := t.rows(dependentsSQL, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var deps []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		deps = append(deps, s)
	}
	return deps, rows.Err()
}

// OpenReady implements engine.PlanTx.
func (t wtx) OpenReady(seqs []int64) ([]actions.Record, error) {
	return t.records(`UPDATE actions SET state = 'open', rev = `+nextRev+`
		WHERE seq IN (SELECT value FROM json_each(?)) AND state = 'blocked'
		AND NOT EXISTS (SELECT 1 FROM prerequisites p WHERE p.seq = actions.seq AND NOT `+preDone+`)
		RETURNING `+recordCols, seqList(seqs))
}

// waitingEdges is every edge of the blocked actions that wait for ?1,
// directly or through other blocked actions, by seq and the order given.
const waitingEdges = `WITH RECURSIVE w (seq) AS (
		SELECT ?1
		UNION
		SELECT p.seq FROM w JOIN prerequisites p ON p.pre = w.seq JOIN actions a ON a.seq = p.seq AND a.state = 'blocked')
	SELECT p.seq, p.pre FROM w JOIN prerequisites p ON p.seq = w.seq WHERE w.seq <> ?1
	ORDER BY p.seq, p.ord`

// Waiting implements engine.PlanTx: the waiters' edges, less those to an
// action that is neither seq nor a waiter (a prerequisite done, say).
func (t wtx) Waiting(seq int64) ([]engine.Edge, error) {
	edges, err := scanEdges(t.rows(waitingEdges, seq))
	if err != nil {
		return nil, err
	}
	in := map[int64]bool{seq: true}
	for _, e := range edges {
		in[e.Seq] = true
	}
	return slices.DeleteFunc(edges, func(e engine.Edge) bool { return !in[e.Pre] }), nil
}

// edgeRows are the rows of a query of edges (seq, pre).
type edgeRows interface {
	pages.Rows
	Scan(dest ...any) error
	Close() error
}

// scanEdges reads the edges a query returns.
func scanEdges[R edgeRows](rows R, err error) ([]engine.Edge, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var edges []engine.Edge
	for rows.Next() {
		var e engine.Edge
		if err := rows.Scan(&e.Seq, &e.Pre); err != nil {
			return nil, err
		}
		edges = append(edges, e)
	}
	return edges, rows.Err()
}

// CancelBlocked implements engine.PlanTx: one statement for every action.
func (t wtx) CancelBlocked(ends []engine.BlockedEnd, by string) ([]actions.Record, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	list := make([][2]any, len(ends))
	for i, e := range ends {
		list[i] = [2]any{e.Seq, e.Reason}
	}
	data, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	recs, err := t.records(`UPDATE actions SET state = 'cancelled', reason = c.reason, ended_by = ?2, done_at = ?3,
			told_at = (CASE WHEN substr(from_whom, 1, 5) = 'user:' THEN ?3 END), rev = `+nextRev+`
		FROM (SELECT value ->> 0 AS seq, value ->> 1 AS reason FROM json_each(?1)) AS c
		WHERE actions.seq = c.seq AND actions.state = 'blocked'
		RETURNING `+recordCols, string(data), by, t.b.nowMS())
	if err != nil || len(recs) == 0 {
		return recs, err
	}
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	return recs, t.moveEnded(seqs)
}

// planOf is the seqs of the actions connected to ?1 through
// prerequisites, both ways, transitively.
const planOf = `WITH RECURSIVE c (seq) AS (
		SELECT ?1
		UNION SELECT p.pre FROM c JOIN prerequisites p ON p.seq = c.seq
		UNION SELECT p.seq FROM c JOIN prerequisites p ON p.pre = c.seq)
	SELECT seq FROM c`

// PlanOf implements engine.PlanReads: the actions in one read, their edges
// in another (the engine drops an edge to an action posted between them).
func (s *store) PlanOf(ctx context.Context, seq int64) ([]actions.Record, []engine.Edge, error) {
	var recs []actions.Record
	err := s.b().read(ctx, "plan", func(ctx context.Context) error {
		rows, err := s.b().rows(ctx, `SELECT `+everyCols+` FROM every_action WHERE seq IN (`+planOf+`) ORDER BY seq`, seq)
		if err != nil {
			return err
		}
		defer rows.Close()
		recs = nil
		for rows.Next() {
			r, err := scanRecord(rows)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		return nil, nil, actions.ErrUnknownAction
	}
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	var edges []engine.Edge
	err = s.b().read(ctx, "plan", func(ctx context.Context) error {
		edges, err = scanEdges(s.b().rows(ctx, `SELECT seq, pre FROM prerequisites
			WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq, ord`, seqList(seqs)))
		return err
	})
	return recs, edges, err
}
