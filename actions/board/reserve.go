package board

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
)

// Reservations on the board file: the table reservations, one row per
// pattern, found by (repo, prefix); the actions' repo, paths (a JSON array
// of patterns, empty for none) and held_by. Writes are serialized by the
// write lock, so a transaction that reads reservations to decide sees
// every one committed before it, and none is committed meanwhile.

// reservationsMigration is schema 4: the reservations and the actions'
// paths. Every existing action keeps its row (no paths, held by nobody).
const reservationsMigration = `
ALTER TABLE actions ADD COLUMN repo TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN paths TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN held_by TEXT NOT NULL DEFAULT '';
CREATE INDEX actions_paths ON actions (repo) WHERE state = 'open' AND repo <> '';
CREATE TABLE reservations (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	res       INTEGER NOT NULL,
	repo      TEXT NOT NULL,
	holder    TEXT NOT NULL,
	pattern   TEXT NOT NULL,
	prefix    TEXT NOT NULL,
	exclusive INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
	reason    TEXT NOT NULL DEFAULT '',
	action    INTEGER,
	created   INTEGER NOT NULL
);
CREATE INDEX reservations_prefix ON reservations (repo, prefix);
CREATE INDEX reservations_holder ON reservations (holder);
CREATE INDEX reservations_action ON reservations (action) WHERE action IS NOT NULL;
`

// heldCols are the columns scanHeld reads, in order.
// The table is r in the statements that read them (json_each has columns
// called id and value); RETURNING takes them unqualified (heldReturned).
const (
	heldCols     = `r.res, r.repo, r.holder, r.pattern, r.exclusive, r.reason, coalesce(r.action, 0), r.created, r.id`
	heldReturned = `res, repo, holder, pattern, exclusive, reason, coalesce(action, 0), created, id`
)

func scanHeld(rows *sql.Rows) ([]engine.Held, error) {
	defer rows.Close()
	var out []engine.Held
	for rows.Next() {
		var (
			h       engine.Held
			created int64
			id      int64
		)
		if err := rows.Scan(&h.Res, &h.Repo, &h.Holder, &h.Pattern, &h.Exclusive, &h.Reason, &h.Action, &created, &id); err != nil {
			return nil, err
		}
		h.Since = fromMS(created)
		out = append(out, h)
	}
	return out, rows.Err()
}

// reservedSQL is the read of the rows s names (see engine.Scope), in
// order: each prefix an index lookup of (repo, prefix), each Under prefix
// an index range.
func reservedSQL(s engine.Scope) (string, []any) {
	switch {
	case s.All && s.Repo == "":
		return `SELECT ` + heldCols + ` FROM reservations r ORDER BY r.res, r.id`, nil
	case s.All:
		return `SELECT ` + heldCols + ` FROM reservations r WHERE r.repo = ? ORDER BY r.res, r.id`, []any{s.Repo}
	}
	q := `SELECT ` + heldCols + ` FROM reservations r WHERE r.repo = ?1 AND r.prefix IN (SELECT value FROM json_each(?2))`
	args := []any{s.Repo, jsonList(s.Exact)}
	if len(s.Under) > 0 {
		// "p/..." sorts from "p/" up to, not including, "p0" ('0' follows
		// '/'), byte by byte as SQLite compares text.
		// CROSS JOIN keeps u the outer loop, so that each of its values is
		// a range of the index.
		q += ` UNION SELECT ` + heldCols + ` FROM json_each(?3) u CROSS JOIN reservations r
			WHERE r.repo = ?1 AND r.prefix >= u.value || '/' AND r.prefix < u.value || '0'`
		args = append(args, jsonList(s.Under))
	}
	return q + ` ORDER BY 1, 9`, args
}

func jsonList(ss []string) string {
	if len(ss) == 0 {
		return "[]"
	}
	data, _ := json.Marshal(ss)
	return string(data)
}

// encodePaths is how the actions table keeps an action's patterns: a
// JSON array, or the empty string for none.
func encodePaths(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return jsonList(paths)
}

// decodePaths reads what encodePaths wrote.
func decodePaths(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var paths []string
	if err := json.Unmarshal([]byte(s), &paths); err != nil {
		return nil, fmt.Errorf("sql: Scan error on column paths: %w", err)
	}
	return paths, nil
}

// Reserved implements engine.Store.
func (s *store) Reserved(ctx context.Context, sc engine.Scope) ([]engine.Held, error) {
	var out []engine.Held
	q, args := reservedSQL(sc)
	err := s.b().read(ctx, "read reservations", func(ctx context.Context) error {
		var err error
		out, err = scanHeldRows(s.b().rows(ctx, q, args...))
		return err
	})
	return out, err
}

func scanHeldRows(rows *sql.Rows, err error) ([]engine.Held, error) {
	if err != nil {
		return nil, err
	}
	return scanHeld(rows)
}

// LockRepo implements engine.Tx: the write lock serializes every write.
func (wtx) LockRepo(string) error { return nil }

// Reserved implements engine.Tx.
func (t wtx) Reserved(s engine.Scope) ([]engine.Held, error) {
	q, args := reservedSQL(s)
	return scanHeldRows(t.rows(q, args...))
}

// AddReservation implements engine.Tx: the reservation's number is the
// id of its first row (ids are never reused: AUTOINCREMENT).
func (t wtx) AddReservation(r engine.NewReservation) (int64, time.Time, error) {
	now := t.b.nowMS()
	var action any
	if r.Action != 0 {
		action = r.Action
	}
	var res int64
	for i, p := range r.Patterns {
		var id int64
		err := t.row(`INSERT INTO reservations (res, repo, holder, pattern, prefix, exclusive, reason, action, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			res, r.Repo, r.Holder, p.String(), p.Prefix(), r.Exclusive, r.Reason, action, now).Scan(&id)
		if err != nil {
			return 0, time.Time{}, err
		}
		if i == 0 {
			res = id
			if _, err := t.exec(`UPDATE reservations SET res = ?1 WHERE id = ?1`, id); err != nil {
				return 0, time.Time{}, err
			}
		}
	}
	return res, fromMS(now), nil
}

// Drop implements engine.Tx.
func (t wtx) Drop(d engine.Drop) ([]engine.Held, error) {
	query, args, err := dropSQL(d)
	if err != nil {
		return nil, err
	}
	return scanHeldRows(t.rows(query, args...))
}

// dropSQL is Drop's statement for d, and its arguments.
func dropSQL(d engine.Drop) (string, []any, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("?%d", len(args))))
	}
	if d.Holder != "" {
		add(`holder = ?`, d.Holder)
	}
	if d.Repo != "" {
		add(`repo = ?`, d.Repo)
	}
	if len(d.Patterns) > 0 {
		add(`pattern IN (SELECT value FROM json_each(?))`, jsonList(d.Patterns))
	}
	if len(d.Actions) > 0 {
		add(`action IN (SELECT value FROM json_each(?))`, seqList(d.Actions))
	}
	if len(where) == 0 {
		return "", nil, fmt.Errorf("drop reservations: nothing named")
	}
	return `DELETE FROM reservations WHERE ` + strings.Join(where, " AND ") + ` RETURNING ` + heldReturned, args, nil
}

// PathActions implements engine.Tx.
func (t wtx) PathActions(repos []string, seqs []int64) ([]engine.PathAction, error) {
	const cols = `seq, to_whom, repo, paths, held_by FROM actions WHERE state = 'open' AND repo <> ''`
	rows, err := t.rows(`SELECT `+cols+` AND repo IN (SELECT value FROM json_each(?1))
		UNION SELECT `+cols+` AND seq IN (SELECT value FROM json_each(?2)) ORDER BY 1`, jsonList(repos), seqList(seqs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.PathAction
	for rows.Next() {
		var (
			a     engine.PathAction
			paths string
		)
		if err := rows.Scan(&a.Seq, &a.To, &a.Repo, &paths, &a.HeldBy); err != nil {
			return nil, err
		}
		if a.Paths, err = decodePaths(paths); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SetHeld implements engine.Tx.
func (t wtx) SetHeld(seq int64, heldBy string) error {
	_, err := t.exec(`UPDATE actions SET held_by = ?, rev = `+nextRev+` WHERE seq = ? AND state = 'open'`, heldBy, seq)
	return err
}

// Life implements engine.Tx.
func (t wtx) Life(who identity.ID) (engine.MemberLife, error) {
	var m liveMember
	err := t.row(`SELECT identity, departed_at IS NOT NULL, pid, lease_until FROM members WHERE identity = ?`, string(who)).
		Scan(&m.id, &m.departed, &m.pid, &m.lease)
	switch {
	case err == sql.ErrNoRows:
		return engine.MemberLife{}, nil
	case err != nil:
		return engine.MemberLife{}, err
	}
	return engine.MemberLife{ID: m.id, Departed: m.departed, Live: m.live(t.b.nowMS())}, nil
}
