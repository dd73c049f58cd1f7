package pgboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
)

// A ptx is the transaction as the engine uses it (engine.Tx). The
// isolation is READ COMMITTED: a statement that must see what it writes
// over locks its rows (FOR UPDATE, FOR SHARE) or does both in one
// statement.
type ptx struct {
	b   *Board
	ctx context.Context
	tx  pgx.Tx
}

var _ engine.Tx = ptx{}

// Notify implements engine.Tx: see Board.notify.
func (t ptx) Notify(e engine.Event) error { return t.b.notify(t.ctx, t.tx, e) }

// Insert implements engine.Tx: one statement for every action, then one
// for every edge.
func (t ptx) Insert(batch []engine.NewAction) ([]actions.Record, error) {
	cols := make([][]string, 7)
	prios := make([]int16, len(batch))
	paths := make([]string, len(batch)) // each action's paths as a text[] literal
	for i, a := range batch {
		for j, v := range []string{a.To, a.From, a.Title, a.Body, string(a.State), a.Repo, a.HeldBy} {
			cols[j] = append(cols[j], v)
		}
		prios[i] = int16(a.Priority)
		paths[i] = textArray(a.Paths)
	}
	// The rows are inserted, and their seqs drawn, in the order of n.
	recs, err := collect(t.tx.Query(t.ctx, `INSERT INTO bee_actions (to_whom, from_whom, title, body, state, priority, posted_at, rev, repo, paths, held_by)
		SELECT n.to_whom, n.from_whom, n.title, n.body, n.state, n.priority, `+nowSQL("$7")+`, `+xid+`, n.repo, n.paths::text[], n.held_by
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::smallint[], $8::text[], $9::text[], $10::text[])
			WITH ORDINALITY AS n (to_whom, from_whom, title, body, state, priority, repo, paths, held_by, i)
		ORDER BY n.i RETURNING `+recordCols, cols[0], cols[1], cols[2], cols[3], cols[4], prios, t.b.now(), cols[5], paths, cols[6]))
	if err != nil {
		return nil, err
	}
	if len(recs) != len(batch) || !slices.IsSortedFunc(recs, func(a, b actions.Record) int { return cmp.Compare(a.Seq, b.Seq) }) {
		return nil, fmt.Errorf("insert: %d actions came back of %d, not in the order given", len(recs), len(batch))
	}
	return recs, t.addPrerequisites(batch, recs)
}

// textArray is ss as a PostgreSQL text[] literal: unnest cannot take an
// array of arrays of differing lengths, so each action's paths travel as
// one text that the insert casts back.
func textArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// Action implements engine.Tx: the hot table first, then, when the action
// is not there, bee_ended_actions. In that order, an action that an end
// committing meanwhile moves is found: the first statement waits for that
// end and then skips the row it deleted, and the second, a later
// snapshot, sees the row it inserted.
func (t ptx) Action(seq int64) (actions.Record, error) {
	rec, err := scanRecord(t.tx.QueryRow(t.ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = $1 FOR UPDATE`, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		rec, err = scanRecord(t.tx.QueryRow(t.ctx, `SELECT `+endedCols+` FROM bee_ended_actions WHERE seq = $1 FOR UPDATE`, seq))
	}
	return rec, noRows(err)
}

// Update implements engine.Tx.
func (t ptx) Update(seq int64, holder string, u engine.Update) (actions.Record, bool, error) {
	sets, args := updateSets(u, t.b.now())
	args = append([]any{seq}, args...)
	where := `seq = $1`
	if holder != "" {
		where += ` AND state = 'claimed' AND holder = $` + strconv.Itoa(len(args)+1)
		args = append(args, holder)
	}
	if !u.State.Ended() {
		query := `UPDATE bee_actions SET ` + strings.Join(sets.assign(), ", ") + ` WHERE ` + where + ` RETURNING ` + recordCols
		return found(scanRecord(t.tx.QueryRow(t.ctx, query, args...)))
	}
	// An end moves the row to bee_ended_actions as it writes it (see
	// endedMigration): one statement, one write of each table.
	query := `WITH moved AS (DELETE FROM bee_actions WHERE ` + where + ` RETURNING ` + actionCols + `)
		INSERT INTO bee_ended_actions (` + actionCols + `) SELECT ` + sets.over(actionCols) + ` FROM moved RETURNING ` + endedCols
	return found(scanRecord(t.tx.QueryRow(t.ctx, query, args...)))
}

// moveEnded moves the actions among seqs that have ended from bee_actions
// to bee_ended_actions, as they are (seq and rev kept), in the
// transaction that ended them (see endedMigration): one statement.
func (t ptx) moveEnded(seqs []int64) error {
	_, err := t.tx.Exec(t.ctx, `WITH moved AS (
			DELETE FROM bee_actions WHERE seq = ANY($1) AND state IN ('done', 'failed', 'cancelled') RETURNING `+actionCols+`)
		INSERT INTO bee_ended_actions (`+actionCols+`) SELECT `+actionCols+` FROM moved`, seqs)
	return err
}

// sets are an update's columns and the expressions they take, in order.
type sets [][2]string

// assign is sets as the items of a SET clause.
func (s sets) assign() []string {
	items := make([]string, len(s))
	for i, cv := range s {
		items[i] = cv[0] + " = " + cv[1]
	}
	return items
}

// over is the select list of cols (a list like actionCols) with s written
// over them: the row as the update would leave it.
func (s sets) over(cols string) string {
	list := strings.Split(cols, ", ")
	for i, c := range list {
		for _, cv := range s {
			if cv[0] == c {
				list[i] = cv[1]
			}
		}
	}
	return strings.Join(list, ", ")
}

// updateSets is what u writes, at the time now (see Board.now), and its
// arguments, from $2 on; every update writes the transaction's rev.
func updateSets(u engine.Update, now any) (sets, []any) {
	if u.State == actions.Open {
		return sets{{"state", `'open'`}, {"holder", `''`}, {"claimed_at", `NULL`}, {"rev", xid}}, nil
	}
	col := "reason"
	if u.State == actions.Done {
		col = "result"
	}
	s := sets{{"state", "$2"}, {col, "$3"}, {"ended_by", "$4"}, {"ended_at", nowSQL("$5")}}
	args := []any{string(u.State), u.Text, u.By, now}
	switch u.Told {
	case engine.ToldIfPerson:
		s = append(s, [2]string{"told_at", `(CASE WHEN starts_with(from_whom, 'user:') THEN ` + nowSQL("$5") + ` END)`})
	case engine.ToldNow:
		s = append(s, [2]string{"told_at", nowSQL("$5")})
	default:
		s = append(s, [2]string{"told_at", `NULL`})
	}
	if u.Holder != "" {
		s = append(s, [2]string{"holder", "$6"})
		args = append(args, u.Holder)
	}
	return append(s, [2]string{"rev", xid}), args
}

// found turns a row that may not exist into (rec, ok).
func found(rec actions.Record, err error) (actions.Record, bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return actions.Record{}, false, nil
	}
	return rec, err == nil, err
}

// Readdress implements engine.Tx.
func (t ptx) Readdress(seq int64, to string) (actions.Record, error) {
	rec, err := scanRecord(t.tx.QueryRow(t.ctx, `UPDATE bee_actions SET to_whom = $2, rev = `+xid+` WHERE seq = $1 RETURNING `+recordCols, seq, to))
	return rec, noRows(err)
}

// Claimant implements engine.Tx: it locks who's member row FOR SHARE (a
// departure for it in flight either commits before, or waits for, the
// claim), joining who for this process when it has no row. Whether to
// reclaim is the look's to say: every member renews while it lives.
func (t ptx) Claimant(w engine.Want, l engine.Look) (engine.Claimant, error) {
	c := engine.Claimant{Reclaim: l.Reclaim, Expiry: l.Expiry}
	const shared = `SELECT departed_at IS NOT NULL FROM bee_members WHERE identity = $1 FOR SHARE`
	err := t.tx.QueryRow(t.ctx, shared, string(w.Who)).Scan(&c.Departed)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := t.join(w.Who); err != nil {
			return engine.Claimant{}, err
		}
		c.Joined = true
		err = t.tx.QueryRow(t.ctx, shared, string(w.Who)).Scan(&c.Departed)
	}
	return c, err
}

// join joins who for this process inside a claim (a Next for an identity
// that never joined), unless its row exists.
func (t ptx) join(who identity.ID) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO bee_members (identity, agent, host, host_key, pid, joined_at, renewed_at, lease_until)
		VALUES ($1, $2, $3, $4, $5, `+nowSQL("$7")+`, `+nowSQL("$7")+`, `+nowSQL("$7")+` + $6 * interval '1 millisecond')
		ON CONFLICT (identity) DO NOTHING`,
		string(who), who.Agent(), t.b.host, t.b.hostKey, os.Getpid(), t.b.opts.Lease.Milliseconds(), t.b.now())
	return err
}

// Take implements engine.Tx: it walks the open actions in claim order
// (bee_actions_open: the most urgent first, oldest first within a
// priority) and stops at the first w may take that nobody holds locked
// (see openFor). With statistics that lag a burst of posts, the planner would
// rather fetch every open action and sort it at each claim.
func (t ptx) Take(w engine.Want) (actions.Record, bool, error) {
	if _, err := t.tx.Exec(t.ctx, `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)`); err != nil {
		return actions.Record{}, false, err
	}
	rec, ok, err := found(scanRecord(t.tx.QueryRow(t.ctx, takeSQL, string(w.Who), w.Recipients(), w.Skip, t.b.now())))
	if ok && t.b.opts.inClaim != nil {
		t.b.opts.inClaim(t.tx.Conn().PgConn().PID())
	}
	return rec, ok, err
}

// takeSQL claims for $1 the first open action (see openFor) in claim
// order that nobody holds locked; $4 is the time.
var takeSQL = `WITH c AS (
		SELECT seq FROM bee_actions WHERE ` + openFor + ` ORDER BY priority, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
	UPDATE bee_actions a SET state = 'claimed', holder = $1, claimed_at = ` + nowSQL("$4") + `, rev = ` + xid + `
	FROM c WHERE a.seq = c.seq RETURNING ` + recordColsOf("a")

// reclaimLock is the advisory lock key of reclaiming ("bee" and 2): one
// claimer at a time departs the members whose lease ran out, so that two
// never lock those rows in different orders.
const reclaimLock = 0x62656502

// Expired implements engine.Tx: unless another claimer is at it, the
// members other than who whose lease ran out, locked in identity order.
func (t ptx) Expired(who identity.ID) ([]identity.ID, bool, error) {
	var mine bool
	if err := t.tx.QueryRow(t.ctx, `SELECT pg_try_advisory_xact_lock($1)`, reclaimLock).Scan(&mine); err != nil || !mine {
		return nil, false, err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT identity FROM bee_members m
		WHERE m.departed_at IS NULL AND m.identity <> $1 AND `+leaseEnd("m", "$2")+` <= `+nowSQL("$3")+`
		ORDER BY identity FOR UPDATE`, string(who), t.b.graceMS(), t.b.now())
	if err != nil {
		return nil, false, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	dead := make([]identity.ID, 0, len(ids))
	for _, id := range ids {
		dead = append(dead, identity.ID(id))
	}
	return dead, err == nil, err
}

// ReleaseOrphans implements engine.Tx.
func (t ptx) ReleaseOrphans(who identity.ID) ([]string, error) {
	return collectIDs(t.tx.Query(t.ctx, `UPDATE bee_actions a SET state = 'open', holder = '', claimed_at = NULL, rev = `+xid+`
		WHERE a.state = 'claimed' AND a.holder <> $1
		AND NOT EXISTS (SELECT 1 FROM bee_members m WHERE m.identity = a.holder AND m.departed_at IS NULL) RETURNING a.seq`, string(who)))
}

// Depart implements engine.Tx: who is marked departed first (which locks
// its row, so a claim for it in flight either commits before or sees it
// departed), then its claims go back to open and the open actions
// addressed to it exactly go to its agent name.
func (t ptx) Depart(who identity.ID) (released, readdressed []string, err error) {
	t.b.procs.forget()
	_, err = t.tx.Exec(t.ctx, `INSERT INTO bee_members (identity, agent, joined_at, renewed_at, lease_until, departed_at)
		VALUES ($1, $2, `+nowSQL("$3")+`, `+nowSQL("$3")+`, `+nowSQL("$3")+`, `+nowSQL("$3")+`)
		ON CONFLICT (identity) DO UPDATE SET lease_until = least(bee_members.lease_until, `+nowSQL("$3")+`),
			departed_at = coalesce(bee_members.departed_at, `+nowSQL("$3")+`), waiter_at = NULL`,
		string(who), who.Agent(), t.b.now())
	if err != nil {
		return nil, nil, err
	}
	if released, err = collectIDs(t.tx.Query(t.ctx, `UPDATE bee_actions SET state = 'open', holder = '', claimed_at = NULL, rev = `+xid+`
		WHERE state = 'claimed' AND holder = $1 RETURNING seq`, string(who))); err != nil {
		return nil, nil, err
	}
	if readdressed, err = collectIDs(t.tx.Query(t.ctx, `UPDATE bee_actions SET to_whom = $2, rev = `+xid+`
		WHERE state = 'open' AND to_whom = $1 RETURNING seq`, string(who), who.Agent())); err != nil {
		return nil, nil, err
	}
	readdressed, err = t.readdressBlocked(who, readdressed)
	return released, readdressed, err
}

// StillDead implements engine.Tx: under the row lock, who may have
// departed or joined again (on another machine) meanwhile.
func (t ptx) StillDead(who identity.ID) (bool, error) {
	t.b.procs.forget()
	var pid int
	var key string
	err := t.tx.QueryRow(t.ctx, `SELECT pid, host_key FROM bee_members WHERE identity = $1 AND departed_at IS NULL FOR UPDATE`,
		string(who)).Scan(&pid, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil && key == t.b.hostKey && !processAlive(pid), err
}

// Join implements engine.Tx: the member lives on this machine.
func (t ptx) Join(m actions.Member) error {
	t.b.procs.forget()
	now := t.b.now()
	// Forget long-gone members, but never one that holds a claim.
	if _, err := t.tx.Exec(t.ctx, `DELETE FROM bee_members WHERE lease_until < `+nowSQL("$3")+` - $1 * interval '1 millisecond'
		AND identity <> $2 AND NOT EXISTS (SELECT 1 FROM bee_actions WHERE state = 'claimed' AND holder = bee_members.identity)`,
		engine.ForgetAfter.Milliseconds(), string(m.ID), now); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, `INSERT INTO bee_members (identity, agent, host, host_key, pid, claude_pid, session_id, joined_at, renewed_at, lease_until, client)
		VALUES ($1, $2, $3, $4, $5, $6, $7, `+nowSQL("$9")+`, `+nowSQL("$9")+`, `+nowSQL("$9")+` + $8 * interval '1 millisecond', $10)
		ON CONFLICT (identity) DO UPDATE SET host = $3, host_key = $4, pid = $5, claude_pid = $6, session_id = $7,
			renewed_at = `+nowSQL("$9")+`, lease_until = `+nowSQL("$9")+` + $8 * interval '1 millisecond', departed_at = NULL, client = $10`,
		string(m.ID), m.ID.Agent(), t.b.host, t.b.hostKey, m.PID, m.ClaudePID, m.SessionID, t.b.opts.Lease.Milliseconds(), now, m.Client)
	return err
}

// SetWaiter implements engine.Tx.
func (t ptx) SetWaiter(who identity.ID, armed bool) error {
	_, err := t.tx.Exec(t.ctx, `UPDATE bee_members SET waiter_at = CASE WHEN $2 THEN `+nowSQL("$3")+` END
		WHERE identity = $1 AND departed_at IS NULL`, string(who), armed, t.b.now())
	return err
}

// MarkTold implements engine.Tx.
func (t ptx) MarkTold(seqs []int64) error {
	_, err := t.tx.Exec(t.ctx, `UPDATE bee_ended_actions SET told_at = `+nowSQL("$2")+` WHERE told_at IS NULL AND seq = ANY($1)`, seqs, t.b.now())
	return err
}

// Untell implements engine.Tx.
func (t ptx) Untell(seqs []int64) error {
	_, err := t.tx.Exec(t.ctx, `UPDATE bee_ended_actions SET told_at = NULL WHERE seq = ANY($1)`, seqs)
	return err
}

// untold finds the oldest ended action whose outcome who ($1) should hear
// and nobody has been told of: posted by who, or by a departed identity of
// who's agent ($2 is "agent:<name>#").
const untold = `SELECT seq FROM bee_ended_actions WHERE told_at IS NULL
	AND (from_whom = $1 OR (starts_with(from_whom, $2)
		AND from_whom IN (SELECT identity FROM bee_members WHERE departed_at IS NOT NULL)))
	ORDER BY rev, seq LIMIT 1`

// TellOutcome implements engine.Tx.
func (t ptx) TellOutcome(who identity.ID) (actions.Record, bool, error) {
	return found(scanRecord(t.tx.QueryRow(t.ctx, `UPDATE bee_ended_actions SET told_at = `+nowSQL("$3")+`
		WHERE seq = (`+untold+` FOR UPDATE SKIP LOCKED) RETURNING `+endedCols, string(who), identity.Prefix+who.Agent()+"#", t.b.now())))
}
