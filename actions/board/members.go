package board

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
)

// forgetAfter is how long a member row outlives its lease before a Join
// deletes it. Until then a departed identity stays refused by Next. An
// idle member renews once every idleRenew, so a live one is never
// forgotten.
const (
	forgetAfter = 7 * 24 * time.Hour
	idleRenew   = 24 * time.Hour
)

// A MemberInfo is a live identity as Members reports it.
type MemberInfo = actions.MemberInfo

// A renewal is the lease-renewing goroutine of one member, ended by closing
// stop (Depart) or by the Board's Close.
type renewal struct {
	stop chan struct{}
}

// Join implements actions.Source: the member's identity is live, with a
// lease this Board renews every Options.Renew while the member holds a
// claim made through it (daily otherwise), until Depart or Close. Joining
// again updates the member's pids and session and, after a Depart, makes
// the identity live again. m.ID must be an identity.
func (b *Board) Join(ctx context.Context, m actions.Member) error {
	if _, err := identity.Parse(string(m.ID)); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	err := b.write(ctx, "join", func(t wtx) error {
		now := b.nowMS()
		// Forget long-gone members, but never one that holds a claim: every
		// claim's holder keeps its row, so its lease can be judged.
		if _, err := t.exec(`DELETE FROM members WHERE lease_until < ? AND identity <> ?
			AND NOT EXISTS (SELECT 1 FROM actions WHERE state = 'claimed' AND holder = members.identity)`,
			now-forgetAfter.Milliseconds(), string(m.ID)); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO members (identity, agent, pid, claude_pid, session_id, joined_at, renewed_at, lease_until)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
			ON CONFLICT (identity) DO UPDATE SET pid = ?3, claude_pid = ?4, session_id = ?5, renewed_at = ?6,
				lease_until = ?7, departed_at = NULL`,
			string(m.ID), m.ID.Agent(), m.PID, m.ClaudePID, m.SessionID, now, now+b.opts.Lease.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("join %s: %w", m.ID, err)
	}
	b.startRenewal(m)
	b.log.Info("member joined", logkey.Identity, string(m.ID), logkey.ClaudePID, m.ClaudePID, logkey.SessionID, m.SessionID)
	return nil
}

// Depart implements actions.Source. In one transaction the claims who
// holds go back to open, the open actions addressed to who exactly are
// re-addressed to who's agent name (so the agent's next identity receives
// them), and who is marked departed, so that a late Next for it is refused
// with ErrDeparted. Waiters in every process wake when anything went back.
// It is fast (one short write transaction) and idempotent; departing an
// identity that never joined records it as departed.
func (b *Board) Depart(ctx context.Context, who identity.ID) error {
	if _, err := identity.Parse(string(who)); err != nil {
		return fmt.Errorf("depart: %w", err)
	}
	start := time.Now()
	b.stopRenewal(who)
	var released, readdressed []string
	err := b.write(ctx, "depart", func(t wtx) error {
		var err error
		released, readdressed, err = departTx(t, who, b.nowMS())
		return err
	})
	if err != nil {
		return fmt.Errorf("depart %s: %w", who, err)
	}
	if len(released) > 0 || len(readdressed) > 0 {
		b.notify.touch(evClaimable, wakeup.Everyone)
	}
	b.log.Info("member departed", logkey.Identity, string(who), "released", released, "readdressed", readdressed,
		logkey.Elapsed, time.Since(start))
	return nil
}

// departTx departs who inside a write transaction: its claims go back to
// open, the open actions addressed to it exactly go to its agent name, and
// it is marked departed (a member row is made for an identity that never
// joined). It returns the ids released and re-addressed.
func departTx(t wtx, who identity.ID, now int64) (released, readdressed []string, err error) {
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

// Members implements actions.Board: the live identities (joined, not
// departed, and either within their lease or with their process still
// running: a member renews its lease only while it holds a claim), oldest
// first, with the actions each holds and whether its waiter is armed. A
// member whose process has died departs first (see reap).
func (b *Board) Members(ctx context.Context) ([]MemberInfo, error) {
	b.reap(ctx)
	members := []MemberInfo{}
	err := b.read(ctx, "members", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT m.identity, m.agent, m.pid, m.claude_pid, m.session_id, m.joined_at, m.renewed_at, m.lease_until,
				(SELECT group_concat(a.seq) FROM actions a WHERE a.state = 'claimed' AND a.holder = m.identity), m.waiter_at
			FROM members m WHERE m.departed_at IS NULL
			ORDER BY m.joined_at, m.identity`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				mi                        MemberInfo
				id                        string
				joined, renewed, leaseEnd int64
				held                      sql.NullString
				waiter                    sql.NullInt64
			)
			if err := rows.Scan(&id, &mi.Agent, &mi.PID, &mi.ClaudePID, &mi.SessionID, &joined, &renewed, &leaseEnd, &held, &waiter); err != nil {
				return err
			}
			if waiter.Valid {
				t := fromMS(waiter.Int64)
				mi.WaiterSince = &t
			}
			if leaseEnd <= b.nowMS() && !processAlive(mi.PID) {
				continue
			}
			mi.ID = identity.ID(id)
			mi.JoinedAt, mi.RenewedAt, mi.LeaseUntil = fromMS(joined), fromMS(renewed), fromMS(leaseEnd)
			mi.Holding = heldIDs(held.String)
			members = append(members, mi)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	return members, nil
}

// processAlive reports whether process pid runs (signal 0 succeeds, or is
// refused for lack of permission).
func processAlive(pid int) bool { return liveness.Alive(pid) }

// heldIDs turns group_concat's "7,3,12" into ["a-3", "a-7", "a-12"].
func heldIDs(list string) []string {
	var seqs []int64
	for s := range strings.SplitSeq(list, ",") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	ids := make([]string, 0, len(seqs))
	for _, n := range seqs {
		ids = append(ids, position.ActionID(n))
	}
	return ids
}

// startRenewal starts m's renewal loop unless one runs already.
func (b *Board) startRenewal(m actions.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.renewals[m.ID]; ok {
		return
	}
	r := &renewal{stop: make(chan struct{})}
	// The first tick is armed here, not in the goroutine: a Join has
	// its renewal scheduled by the time it returns.
	t := b.clock.NewTimer(b.opts.Renew)
	if b.g.Go(func() { b.renew(r, m, t) }) {
		b.renewals[m.ID] = r
	} else {
		t.Stop()
	}
}

// stopRenewal ends who's renewal loop, if this Board runs one. It does not
// wait: a renewal in flight cannot bring who back, since it renews only a
// member that has not departed.
func (b *Board) stopRenewal(who identity.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.hot, who)
	delete(b.held, who)
	if r, ok := b.renewals[who]; ok {
		close(r.stop)
		delete(b.renewals, who)
	}
}

// renew extends m's lease every Options.Renew while m holds a claim made
// through this Board, and once every idleRenew otherwise, until stopped,
// the Board closes, or m turns out to have departed. A failed renewal is
// logged and retried at the next tick; a claim's lease (3 renewals long by
// default, and at least Lease-Renew to run when it was claimed) absorbs
// one. t is the first tick's timer.
//
// Each tick arms the next before renewing, as a ticker does: renewals keep
// their pace however long a write takes, and a test that advances a manual
// clock once it sees a renewal finds the next tick armed.
func (b *Board) renew(r *renewal, m actions.Member, t actions.Timer) {
	log := b.log.With(logkey.Identity, string(m.ID))
	last := b.clock.Now() // Join has just written the lease
	defer func() { t.Stop() }()
	for {
		select {
		case <-r.stop:
			return
		case <-b.ctx.Done():
			return
		case <-t.C():
		}
		t = b.clock.NewTimer(b.opts.Renew)
		if !b.holds(m.ID) && b.clock.Now().Sub(last) < idleRenew {
			// Nothing to keep: a lease guards claims only, and the next
			// claim refreshes it. An idle bridge costs no CPU.
			continue
		}
		last = b.clock.Now()
		departed, err := b.renewOnce(m)
		switch {
		case err != nil && b.ctx.Err() == nil:
			log.Warn("lease renewal failed; retrying at the next tick", logkey.Err, err)
		case departed:
			log.Info("member departed elsewhere; renewal stops")
			b.mu.Lock()
			if b.renewals[m.ID] == r {
				delete(b.renewals, m.ID)
			}
			b.mu.Unlock()
			return
		}
	}
}

// addHeld counts a claim made (+1) or settled (-1) through this Board.
func (b *Board) addHeld(who identity.ID, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[who] + n; h > 0 {
		b.held[who] = h
	} else {
		delete(b.held, who)
	}
}

// holds reports whether who holds a claim made through this Board.
func (b *Board) holds(who identity.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[who] > 0
}

// renewOnce extends m's lease. A member row that has gone (forgotten) is
// made again; a departed member is left departed and reported.
func (b *Board) renewOnce(m actions.Member) (departed bool, err error) {
	err = b.write(b.ctx, "renew lease", func(t wtx) error {
		now := b.nowMS()
		lease := now + b.opts.Lease.Milliseconds()
		res, err := t.exec(`UPDATE members SET lease_until = ?, renewed_at = ? WHERE identity = ? AND departed_at IS NULL`,
			lease, now, string(m.ID))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var gone sql.NullInt64
		err = t.row(`SELECT departed_at FROM members WHERE identity = ?`, string(m.ID)).Scan(&gone)
		if err == nil {
			departed = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = t.exec(`INSERT INTO members (identity, agent, pid, claude_pid, session_id, joined_at, renewed_at, lease_until)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)`,
			string(m.ID), m.ID.Agent(), m.PID, m.ClaudePID, m.SessionID, now, lease)
		return err
	})
	return departed, err
}
