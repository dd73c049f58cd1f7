package board

import (
	"database/sql"
	"errors"
	"os"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
)

// The write transaction as the engine uses it (engine.Tx). Writes are
// serialized by the write lock, so a transaction that looks before it
// writes sees what it writes over.

var _ engine.Tx = wtx{}

// Notify implements engine.Tx: the notify files are touched after the
// commit (see store.Tell).
func (wtx) Notify(engine.Event) error { return nil }

// Insert implements engine.Tx: one statement per action (prepared once),
// then one for every edge.
func (t wtx) Insert(batch []engine.NewAction) ([]actions.Record, error) {
	now := t.b.nowMS()
	recs := make([]actions.Record, 0, len(batch))
	for _, a := range batch {
		rec, err := scanRecord(t.row(`INSERT INTO actions (to_whom, from_whom, title, body, state, priority, posted_at, rev, repo, paths, held_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, `+nextRev+`, ?, ?, ?) RETURNING `+recordCols,
			a.To, a.From, a.Title, a.Body, string(a.State), a.Priority, now, a.Repo, encodePaths(a.Paths), a.HeldBy))
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, t.addPrerequisites(batch, recs)
}

// Action implements engine.Tx.
func (t wtx) Action(seq int64) (actions.Record, error) {
	rec, err := scanRecord(t.row(selectAction, seq))
	return rec, noRows(err)
}

// Update implements engine.Tx.
func (t wtx) Update(seq int64, holder string, u engine.Update) (actions.Record, bool, error) {
	query, args := updateSQL(u, holder != "", t.b.nowMS())
	args = append(args, seq)
	if holder != "" {
		args = append(args, holder)
	}
	rec, ok, err := found(scanRecord(t.row(query, args...)))
	if ok && rec.State.Ended() {
		err = t.moveEnded([]int64{seq})
	}
	return rec, ok, err
}

// updateSQL is Update's statement for u at the time now (ms), and its
// arguments but the seq (and the holder, when held) that follow them.
func updateSQL(u engine.Update, held bool, now int64) (string, []any) {
	set, args := updateSet(u, now)
	query := `UPDATE actions SET ` + set + `, rev = ` + nextRev + ` WHERE seq = ?`
	if held {
		query += ` AND state = 'claimed' AND holder = ?`
	}
	return query + ` RETURNING ` + recordCols, args
}

// moveEnded moves the actions among seqs that have ended from actions to
// ended_actions, as they are (seq and rev kept), in the transaction that
// ended them (see endedMigration).
func (t wtx) moveEnded(seqs []int64) error {
	list := seqList(seqs)
	if _, err := t.exec(copyEndedSQL, list); err != nil {
		return err
	}
	_, err := t.exec(deleteEndedSQL, list)
	return err
}

// moveEnded's statements: ? is the list of seqs.
var (
	copyEndedSQL = `INSERT INTO ended_actions (` + actionCols + `) SELECT ` + actionCols + ` FROM actions
		WHERE seq IN (SELECT value FROM json_each(?)) AND state IN ('done', 'failed', 'cancelled') ORDER BY seq`
	deleteEndedSQL = `DELETE FROM actions WHERE seq IN (SELECT value FROM json_each(?)) AND state IN ('done', 'failed', 'cancelled')`
)

// updateSet is the SET clause of u, at the time now (ms), and its
// arguments.
func updateSet(u engine.Update, now int64) (string, []any) {
	if u.State == actions.Open {
		return `state = 'open', holder = '', claimed_at = NULL`, nil
	}
	col := "reason"
	if u.State == actions.Done {
		col = "result"
	}
	set := `state = ?, ` + col + ` = ?, ended_by = ?, done_at = ?, told_at = `
	args := []any{string(u.State), u.Text, u.By, now}
	switch u.Told {
	case engine.ToldIfPerson:
		set += `(CASE WHEN substr(from_whom, 1, 5) = 'user:' THEN ? END)`
		args = append(args, now)
	case engine.ToldNow:
		set += `?`
		args = append(args, now)
	default:
		set += `NULL`
	}
	if u.Holder != "" {
		set += `, holder = ?`
		args = append(args, u.Holder)
	}
	return set, args
}

// found turns a row that may not exist into (rec, ok).
func found(rec actions.Record, err error) (actions.Record, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return actions.Record{}, false, nil
	}
	return rec, err == nil, err
}

// Readdress implements engine.Tx.
func (t wtx) Readdress(seq int64, to string) (actions.Record, error) {
	rec, err := scanRecord(t.row(`UPDATE actions SET to_whom = ?, rev = `+nextRev+` WHERE seq = ? RETURNING `+recordCols, to, seq))
	return rec, noRows(err)
}

// oldestFor is the one place the board file says which open actions a
// claimant may take, and in what order (see engine.Want): the seq of the
// most urgent open action (oldest first within a priority) addressed to
// anyone, to the agent named by the parameter agent or to the identity
// who, not held back from who (its held_by is empty or who), not in the
// JSON array skip, or NULL. Three walks of actions_open (to_whom,
// priority, seq) that stop at their first row, each giving its (priority,
// seq) as one number so that the three need no sort: "IN (...) ORDER BY
// priority, seq LIMIT 1" would sort every open action instead.
func oldestFor(who, agent, skip string) string {
	walk := func(to string) string {
		return `(SELECT priority * ` + seqSpan + ` + seq FROM actions WHERE state = 'open' AND to_whom = ` + to +
			` AND held_by IN ('', ` + who + `)` +
			` AND seq NOT IN (SELECT value FROM json_each(` + skip + `)) ORDER BY priority, seq LIMIT 1)`
	}
	return `SELECT min(s) % ` + seqSpan + ` FROM (SELECT ` + walk("''") + ` AS s UNION ALL SELECT ` + walk(agent) +
		` UNION ALL SELECT ` + walk(who) + `)`
}

// seqSpan is above every seq a board will reach (2^50), so that priority
// * seqSpan + seq orders by priority, then seq.
const seqSpan = `1125899906842624`

// takeOldest claims oldestFor for who (?1; ?2 is the time, ?3 its agent,
// ?4 the skip list), unless who departed meanwhile.
var takeOldest = `UPDATE actions SET state = 'claimed', holder = ?1, claimed_at = ?2, rev = ` + nextRev + `
	WHERE state = 'open' AND seq = (` + oldestFor("?1", "?3", "?4") + `)
	AND EXISTS (SELECT 1 FROM members WHERE identity = ?1 AND departed_at IS NULL)
	RETURNING ` + recordCols

// earliestLease is the earliest lease end among the holders of claims
// other than ?1: 0 for a holder without a live member row, NULL when nobody
// else holds a claim. It visits each holder once (a loose index scan of
// actions_claimed), not each claim.
const earliestLease = `WITH RECURSIVE h (holder) AS (
		SELECT min(holder) FROM actions WHERE state = 'claimed'
		UNION ALL
		SELECT (SELECT min(holder) FROM actions WHERE state = 'claimed' AND holder > h.holder) FROM h WHERE h.holder IS NOT NULL)
	SELECT min(coalesce(m.lease_until, 0)) FROM h LEFT JOIN members m ON m.identity = h.holder AND m.departed_at IS NULL
	WHERE h.holder IS NOT NULL AND h.holder <> ?1`

// Claims whose holder is departed, unknown or out of lease (?1 is who,
// ?2 the time).
const expiredClaims = `state = 'claimed' AND holder <> ?1 AND NOT EXISTS (SELECT 1 FROM members m
	WHERE m.identity = actions.holder AND m.departed_at IS NULL AND m.lease_until > ?2)`

// Claimant implements engine.Tx. When l found who a live member with a
// fresh lease and no other claim's lease run out, the claim is Take's one
// statement (the common case, kept short because the write lock is held
// meanwhile); otherwise the transaction looks again, joins who or
// refreshes its lease, and says whether to reclaim. Looking before writing
// means that when waiters race for one action, the losers find nothing
// and end without writing.
func (t wtx) Claimant(w engine.Want, l engine.Look) (engine.Claimant, error) {
	b := t.b
	now := b.nowMS()
	if l.Member && (l.Expiry.IsZero() || l.Expiry.UnixMilli() > now) && l.Lease.UnixMilli() > now+b.claimMargin() {
		return engine.Claimant{Lease: l.Lease, Expiry: l.Expiry}, nil
	}
	var (
		departed                        sql.NullBool
		leaseUntil, earliest, candidate sql.NullInt64
	)
	err := t.row(`SELECT
			(SELECT departed_at IS NOT NULL FROM members WHERE identity = ?1),
			(SELECT lease_until FROM members WHERE identity = ?1),
			(`+earliestLease+`),
			(`+oldestFor("?1", "?3", "?4")+`)`,
		string(w.Who), now, w.Who.Agent(), seqList(w.Skip)).Scan(&departed, &leaseUntil, &earliest, &candidate)
	if err != nil {
		return engine.Claimant{}, err
	}
	c := engine.Claimant{Reclaim: earliest.Valid && earliest.Int64 <= now}
	if earliest.Valid && !c.Reclaim {
		c.Expiry = fromMS(earliest.Int64)
	}
	switch {
	case departed.Valid && departed.Bool:
		c.Departed = true
		return c, nil
	case !c.Reclaim && !candidate.Valid:
		c.Idle = true
		return c, nil
	}
	lease := leaseUntil.Int64
	c.Joined, lease, err = b.joinOrRefresh(t, w.Who, now, departed.Valid, lease)
	c.Lease = fromMS(lease)
	return c, err
}

// claimMargin is how long a claimant's lease must have left: it must
// outlast the wait for its next renewal tick (an idle member does not
// renew), with a failed renewal to spare.
func (b *Board) claimMargin() int64 { return (b.opts.Lease - b.opts.Renew).Milliseconds() }

// joinOrRefresh makes who a member (when it has no row: known is false)
// or refreshes a lease that has run low, and returns who's lease end. An
// idle member does not renew, and a late renewal is possible: a
// claimant's lease must not run out before its next renewal.
func (b *Board) joinOrRefresh(t wtx, who identity.ID, now int64, known bool, lease int64) (joined bool, _ int64, err error) {
	switch {
	case !known:
		lease = now + b.opts.Lease.Milliseconds()
		_, err = t.exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until)
			VALUES (?, ?, ?, ?, ?, ?)`, string(who), who.Agent(), os.Getpid(), now, now, lease)
		return true, lease, err
	case lease < now+b.claimMargin():
		lease = now + b.opts.Lease.Milliseconds()
		_, err = t.exec(`UPDATE members SET lease_until = ? WHERE identity = ?`, lease, string(who))
	}
	return false, lease, err
}

// Take implements engine.Tx.
func (t wtx) Take(w engine.Want) (actions.Record, bool, error) {
	return found(scanRecord(t.row(takeOldest, string(w.Who), t.b.nowMS(), w.Who.Agent(), seqList(w.Skip))))
}

// Expired implements engine.Tx: the holders of claims other than who's
// whose member is departed, unknown or out of lease. A holder renews while
// it holds a claim, so one whose lease ran out has died.
func (t wtx) Expired(who identity.ID) ([]identity.ID, bool, error) {
	rows, err := t.rows(`SELECT DISTINCT holder FROM actions WHERE `+expiredClaims+` ORDER BY holder`, string(who), t.b.nowMS())
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var dead []identity.ID
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, false, err
		}
		if _, err := identity.Parse(h); err == nil {
			dead = append(dead, identity.ID(h))
		}
	}
	return dead, true, rows.Err()
}

// ReleaseOrphans implements engine.Tx.
func (t wtx) ReleaseOrphans(who identity.ID) ([]string, error) {
	return collectIDs(t.rows(`UPDATE actions SET state = 'open', holder = '', claimed_at = NULL, rev = `+nextRev+`
		WHERE `+expiredClaims+` RETURNING seq`, string(who), t.b.nowMS()))
}

// Depart implements engine.Tx.
func (t wtx) Depart(who identity.ID) (released, readdressed []string, err error) {
	now := t.b.nowMS()
	var rev int64
	if err = t.row(`SELECT ` + nextRev).Scan(&rev); err != nil {
		return nil, nil, err
	}
	if released, err = collectIDs(t.rows(`UPDATE actions SET state = 'open', holder = '', claimed_at = NULL, rev = ?
		WHERE state = 'claimed' AND holder = ? RETURNING seq`, rev, string(who))); err != nil {
		return nil, nil, err
	}
	if readdressed, err = collectIDs(t.rows(`UPDATE actions SET to_whom = ?, rev = ?
		WHERE state = 'open' AND to_whom = ? RETURNING seq`, who.Agent(), rev, string(who))); err != nil {
		return nil, nil, err
	}
	if readdressed, err = t.readdressBlocked(who, rev, readdressed); err != nil {
		return nil, nil, err
	}
	_, err = t.exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until, departed_at)
		VALUES (?1, ?2, 0, ?3, ?3, ?3, ?3)
		ON CONFLICT (identity) DO UPDATE SET lease_until = min(lease_until, ?3), departed_at = coalesce(departed_at, ?3),
			waiter_at = NULL`,
		string(who), who.Agent(), now)
	return released, readdressed, err
}

// collectIDs turns the seqs a query returns into action ids.
func collectIDs(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		ids = append(ids, position.ActionID(seq))
	}
	return ids, rows.Err()
}

// StillDead implements engine.Tx.
func (t wtx) StillDead(who identity.ID) (bool, error) {
	var pid int
	err := t.row(`SELECT pid FROM members WHERE identity = ? AND departed_at IS NULL`, string(who)).Scan(&pid)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && !processAlive(pid), err
}

// Join implements engine.Tx.
func (t wtx) Join(m actions.Member) error {
	now := t.b.nowMS()
	// Forget long-gone members, but never one that holds a claim: every
	// claim's holder keeps its row, so its lease can be judged.
	if _, err := t.exec(`DELETE FROM members WHERE lease_until < ? AND identity <> ?
		AND NOT EXISTS (SELECT 1 FROM actions WHERE state = 'claimed' AND holder = members.identity)`,
		now-engine.ForgetAfter.Milliseconds(), string(m.ID)); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO members (identity, agent, pid, claude_pid, session_id, joined_at, renewed_at, lease_until, client)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8)
		ON CONFLICT (identity) DO UPDATE SET pid = ?3, claude_pid = ?4, session_id = ?5, renewed_at = ?6,
			lease_until = ?7, departed_at = NULL, client = ?8`,
		string(m.ID), m.ID.Agent(), m.PID, m.ClaudePID, m.SessionID, now, now+t.b.opts.Lease.Milliseconds(), m.Client)
	return err
}

// SetWaiter implements engine.Tx.
func (t wtx) SetWaiter(who identity.ID, armed bool) error {
	var at any
	if armed {
		at = t.b.nowMS()
	}
	_, err := t.exec(`UPDATE members SET waiter_at = ? WHERE identity = ? AND departed_at IS NULL`, at, string(who))
	return err
}

// MarkTold implements engine.Tx.
func (t wtx) MarkTold(seqs []int64) error {
	_, err := t.exec(`UPDATE ended_actions SET told_at = ? WHERE told_at IS NULL AND seq IN (SELECT value FROM json_each(?))`,
		t.b.nowMS(), seqList(seqs))
	return err
}

// Untell implements engine.Tx.
func (t wtx) Untell(seqs []int64) error {
	_, err := t.exec(`UPDATE ended_actions SET told_at = NULL WHERE seq IN (SELECT value FROM json_each(?))`, seqList(seqs))
	return err
}

// untold finds the oldest ended action whose outcome who (?1) should hear
// and nobody has been told of: posted by who, or by a departed identity of
// who's agent (?2 is "agent:<name>#").
const untold = `SELECT seq FROM ended_actions WHERE told_at IS NULL
	AND (from_whom = ?1 OR (substr(from_whom, 1, length(?2)) = ?2
		AND from_whom IN (SELECT identity FROM members WHERE departed_at IS NOT NULL)))
	ORDER BY rev LIMIT 1`

// TellOutcome implements engine.Tx.
func (t wtx) TellOutcome(who identity.ID) (actions.Record, bool, error) {
	return found(scanRecord(t.row(`UPDATE ended_actions SET told_at = ?3 WHERE seq = (`+untold+`) RETURNING `+recordColsOf("ended_actions"),
		string(who), agentPrefix(who), t.b.nowMS())))
}
