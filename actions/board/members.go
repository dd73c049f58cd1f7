package board

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
)

// idleRenew is how often an idle member renews its lease: well within
// engine.ForgetAfter, so that a live one is never forgotten.
const idleRenew = 24 * time.Hour

// A renewal is the lease-renewing goroutine of one member, ended by closing
// stop (Depart) or by the Board's Close.
type renewal struct {
	stop chan struct{}
}

// Members implements engine.Store: the live identities (joined, not
// departed, and either within their lease or with their process still
// running: a member renews its lease only while it holds a claim), oldest
// first, with the actions each holds and whether its waiter is armed.
func (s *store) Members(ctx context.Context) ([]actions.MemberInfo, error) {
	b := s.b()
	members := []actions.MemberInfo{}
	err := b.read(ctx, "members", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT m.identity, m.agent, m.pid, m.claude_pid, m.session_id, m.joined_at, m.renewed_at, m.lease_until,
				(SELECT group_concat(a.seq) FROM actions a WHERE a.state = 'claimed' AND a.holder = m.identity), m.waiter_at, m.client
			FROM members m WHERE m.departed_at IS NULL
			ORDER BY m.joined_at, m.identity`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				mi                        actions.MemberInfo
				id                        string
				joined, renewed, leaseEnd int64
				held                      sql.NullString
				waiter                    sql.NullInt64
			)
			if err := rows.Scan(&id, &mi.Agent, &mi.PID, &mi.ClaudePID, &mi.SessionID, &joined, &renewed, &leaseEnd, &held, &waiter, &mi.Client); err != nil {
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
		return nil, err
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
	if b.life.Go(func() { b.renew(r, m, t) }) {
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
		_, err = t.exec(`INSERT INTO members (identity, agent, pid, claude_pid, session_id, joined_at, renewed_at, lease_until, client)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8)`,
			string(m.ID), m.ID.Agent(), m.PID, m.ClaudePID, m.SessionID, now, lease, m.Client)
		return err
	})
	return departed, err
}
