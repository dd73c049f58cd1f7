package pgboard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
)

// Reservations on PostgreSQL: the table bee_reservations, one row per
// pattern, found by (repo, prefix); the actions' repo, paths and held_by.
// The isolation is READ COMMITTED, so a transaction that decides on a
// repository's reservations first takes a transaction advisory lock on the
// repository's name (LockRepo): the next one's reads, statements later,
// see what the first committed.

// reservationsMigration is schema 2: the reservations and the actions'
// paths. Every existing action keeps its row (no paths, held by nobody).
// prefix compares byte by byte (COLLATE "C"), so that the prefixes under
// "p" are the index range from "p/" to "p0", whatever the database's
// collation.
const reservationsMigration = `
ALTER TABLE bee_actions ADD COLUMN repo text NOT NULL DEFAULT '',
	ADD COLUMN paths text[] NOT NULL DEFAULT '{}',
	ADD COLUMN held_by text NOT NULL DEFAULT '';
CREATE INDEX bee_actions_paths ON bee_actions (repo) WHERE state = 'open' AND repo <> '';
CREATE TABLE bee_reservations (
	id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	res       bigint NOT NULL,
	repo      text NOT NULL,
	holder    text NOT NULL,
	pattern   text NOT NULL,
	prefix    text COLLATE "C" NOT NULL,
	exclusive boolean NOT NULL,
	reason    text NOT NULL DEFAULT '',
	action    bigint,
	created   timestamptz NOT NULL
);
CREATE INDEX bee_reservations_prefix ON bee_reservations (repo, prefix);
CREATE INDEX bee_reservations_holder ON bee_reservations (holder);
CREATE INDEX bee_reservations_action ON bee_reservations (action) WHERE action IS NOT NULL;
`

// repoLock is the first key of the advisory locks of repositories ("bee"
// and 3); the second is the hash of the repository's name. Two keys are
// another lock space than the one-key locks of migrations and reclaims.
const repoLock = 0x62656503

// heldCols are the columns scanHeld reads, in order.
const heldCols = `res, repo, holder, pattern, exclusive, reason, coalesce(action, 0), created`

func scanHeld(rows pgx.Rows, err error) ([]engine.Held, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.Held, error) {
		var h engine.Held
		err := row.Scan(&h.Res, &h.Repo, &h.Holder, &h.Pattern, &h.Exclusive, &h.Reason, &h.Action, &h.Since)
		h.Since = h.Since.UTC()
		return h, err
	})
}

// reservedSQL is the read of the rows s names (see engine.Scope), in
// order: each prefix an index lookup of (repo, prefix), each Under prefix
// an index range.
func reservedSQL(s engine.Scope) (string, []any) {
	switch {
	case s.All && s.Repo == "":
		return `SELECT ` + heldCols + ` FROM bee_reservations ORDER BY res, id`, nil
	case s.All:
		return `SELECT ` + heldCols + ` FROM bee_reservations WHERE repo = $1 ORDER BY res, id`, []any{s.Repo}
	}
	const raw = `r.res, r.repo, r.holder, r.pattern, r.exclusive, r.reason, r.action, r.created, r.id`
	q := `SELECT ` + raw + ` FROM bee_reservations r WHERE r.repo = $1 AND r.prefix = ANY($2::text[])`
	args := []any{s.Repo, nonNil(s.Exact)}
	if len(s.Under) > 0 {
		q += ` UNION SELECT ` + raw + ` FROM bee_reservations r, unnest($3::text[]) u (p)
			WHERE r.repo = $1 AND r.prefix >= u.p || '/' AND r.prefix < u.p || '0'`
		args = append(args, s.Under)
	}
	return `SELECT ` + heldCols + ` FROM (` + q + `) x ORDER BY res, id`, args
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// Reserved implements engine.Store.
func (s *store) Reserved(ctx context.Context, sc engine.Scope) ([]engine.Held, error) {
	var out []engine.Held
	q, args := reservedSQL(sc)
	err := s.b().read(ctx, "read reservations", func(ctx context.Context) error {
		var err error
		out, err = scanHeld(s.pool.Query(ctx, q, args...))
		return err
	})
	return out, err
}

// LockRepo implements engine.Tx.
func (t ptx) LockRepo(repo string) error {
	_, err := t.tx.Exec(t.ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, repoLock, repo)
	return err
}

// Reserved implements engine.Tx.
func (t ptx) Reserved(s engine.Scope) ([]engine.Held, error) {
	q, args := reservedSQL(s)
	return scanHeld(t.tx.Query(t.ctx, q, args...))
}

// AddReservation implements engine.Tx: the reservation's number is the id
// of its first row (an identity column, so INSERT is the only privilege
// it needs).
func (t ptx) AddReservation(r engine.NewReservation) (int64, time.Time, error) {
	pats, prefixes := make([]string, len(r.Patterns)), make([]string, len(r.Patterns))
	for i, p := range r.Patterns {
		pats[i], prefixes[i] = p.String(), p.Prefix()
	}
	var action *int64
	if r.Action != 0 {
		action = &r.Action
	}
	var (
		ids   []int64
		since time.Time
	)
	err := t.tx.QueryRow(t.ctx, `WITH ins AS (
			INSERT INTO bee_reservations (res, repo, holder, pattern, prefix, exclusive, reason, action, created)
			SELECT 0, $1, $2, p, x, $5, $6, $7, `+nowSQL("$8")+` FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u (p, x, n)
			ORDER BY n RETURNING id, created)
		SELECT array_agg(id ORDER BY id), min(created) FROM ins`,
		r.Repo, r.Holder, pats, prefixes, r.Exclusive, r.Reason, action, t.b.now()).Scan(&ids, &since)
	if err != nil {
		return 0, time.Time{}, err
	}
	if len(ids) == 0 {
		return 0, time.Time{}, errors.New("add reservation: no patterns")
	}
	res := ids[0]
	_, err = t.tx.Exec(t.ctx, `UPDATE bee_reservations SET res = $1 WHERE id = ANY($2)`, res, ids)
	return res, since.UTC(), err
}

// Drop implements engine.Tx.
func (t ptx) Drop(d engine.Drop) ([]engine.Held, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "$", "$"+strconv.Itoa(len(args))))
	}
	if d.Holder != "" {
		add(`holder = $`, d.Holder)
	}
	if d.Repo != "" {
		add(`repo = $`, d.Repo)
	}
	if len(d.Patterns) > 0 {
		add(`pattern = ANY($::text[])`, d.Patterns)
	}
	if len(d.Actions) > 0 {
		add(`action = ANY($::bigint[])`, d.Actions)
	}
	if len(where) == 0 {
		return nil, errors.New("drop reservations: nothing named")
	}
	return scanHeld(t.tx.Query(t.ctx, `DELETE FROM bee_reservations WHERE `+strings.Join(where, " AND ")+` RETURNING `+heldCols, args...))
}

// PathActions implements engine.Tx.
func (t ptx) PathActions(repos []string, seqs []int64) ([]engine.PathAction, error) {
	if seqs == nil {
		seqs = []int64{}
	}
	rows, err := t.tx.Query(t.ctx, `SELECT seq, to_whom, repo, paths, held_by FROM bee_actions
		WHERE state = 'open' AND repo <> '' AND (repo = ANY($1::text[]) OR seq = ANY($2::bigint[])) ORDER BY seq`, nonNil(repos), seqs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.PathAction, error) {
		var a engine.PathAction
		err := row.Scan(&a.Seq, &a.To, &a.Repo, &a.Paths, &a.HeldBy)
		return a, err
	})
}

// SetHeld implements engine.Tx: a row another transaction holds locked
// is skipped rather than waited for (see engine.ReserveTx.SetHeld), so
// that a claim, which locks the action before the repository, never waits
// for a transaction that waits for it.
func (t ptx) SetHeld(seq int64, heldBy string) error {
	_, err := t.tx.Exec(t.ctx, `UPDATE bee_actions SET held_by = $2, rev = `+xid+`
		WHERE seq = (SELECT seq FROM bee_actions WHERE seq = $1 AND state = 'open' FOR UPDATE SKIP LOCKED)`, seq, heldBy)
	return err
}

// Life implements engine.Tx.
func (t ptx) Life(who identity.ID) (engine.MemberLife, error) {
	var m liveMember
	err := t.tx.QueryRow(t.ctx, `SELECT `+liveCols+` FROM bee_members m WHERE m.identity = $3`,
		t.b.graceMS(), t.b.now(), string(who)).Scan(&m.id, &m.departed, &m.hostKey, &m.pid, &m.inLease)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return engine.MemberLife{}, nil
	case err != nil:
		return engine.MemberLife{}, fmt.Errorf("read member %s: %w", who, err)
	}
	return engine.MemberLife{ID: m.id, Departed: m.departed, Live: t.b.live(m)}, nil
}
