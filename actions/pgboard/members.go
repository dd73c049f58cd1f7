package pgboard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
)

// forgetAfter is how long a member row outlives its lease before a Join
// deletes it. Until then a departed identity stays refused by Next.
const forgetAfter = 7 * 24 * time.Hour

// leaseEnd is the end of the lease of the member row m, on the board's
// clock ($grace is Board.graceMS): never sooner than a lease after the
// server started, so that a restart gives every member the time to renew.
// The server's start is on the server's clock; the skew in $grace puts it
// on the board's.
func leaseEnd(m, grace string) string {
	return `greatest(` + m + `.lease_until, pg_postmaster_start_time() + ` + grace + ` * interval '1 millisecond')`
}

// Join implements actions.Source: the member's identity is live, on this
// machine, with a lease this Board renews every Options.Renew until Depart
// or Close. Joining again updates the member's pids and session and, after
// a Depart, makes the identity live again. m.ID must be an identity.
func (b *Board) Join(ctx context.Context, m actions.Member) error {
	if _, err := identity.Parse(string(m.ID)); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	err := b.write(ctx, "join", func(ctx context.Context, tx pgx.Tx) error {
		now := b.now()
		// Forget long-gone members, but never one that holds a claim.
		if _, err := tx.Exec(ctx, `DELETE FROM bee_members WHERE lease_until < `+nowSQL("$3")+` - $1 * interval '1 millisecond'
			AND identity <> $2 AND NOT EXISTS (SELECT 1 FROM bee_actions WHERE state = 'claimed' AND holder = bee_members.identity)`,
			forgetAfter.Milliseconds(), string(m.ID), now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO bee_members (identity, agent, host, host_key, pid, claude_pid, session_id, joined_at, renewed_at, lease_until)
			VALUES ($1, $2, $3, $4, $5, $6, $7, `+nowSQL("$9")+`, `+nowSQL("$9")+`, `+nowSQL("$9")+` + $8 * interval '1 millisecond')
			ON CONFLICT (identity) DO UPDATE SET host = $3, host_key = $4, pid = $5, claude_pid = $6, session_id = $7,
				renewed_at = `+nowSQL("$9")+`, lease_until = `+nowSQL("$9")+` + $8 * interval '1 millisecond', departed_at = NULL`,
			string(m.ID), m.ID.Agent(), b.host, b.hostKey, m.PID, m.ClaudePID, m.SessionID, b.opts.Lease.Milliseconds(), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("join %s: %w", m.ID, err)
	}
	b.mu.Lock()
	b.members[m.ID] = m
	b.mu.Unlock()
	b.log.Info("member joined", logkey.Identity, string(m.ID), logkey.ClaudePID, m.ClaudePID, logkey.SessionID, m.SessionID)
	return nil
}

// joinTx joins who for this process inside a claim (a Next for an identity
// that never joined), unless its row exists.
func (b *Board) joinTx(ctx context.Context, tx pgx.Tx, who identity.ID) error {
	_, err := tx.Exec(ctx, `INSERT INTO bee_members (identity, agent, host, host_key, pid, joined_at, renewed_at, lease_until)
		VALUES ($1, $2, $3, $4, $5, `+nowSQL("$7")+`, `+nowSQL("$7")+`, `+nowSQL("$7")+` + $6 * interval '1 millisecond')
		ON CONFLICT (identity) DO NOTHING`,
		string(who), who.Agent(), b.host, b.hostKey, os.Getpid(), b.opts.Lease.Milliseconds(), b.now())
	return err
}

// Depart implements actions.Source. In one transaction the claims who
// holds go back to open, the open actions addressed to who exactly are
// re-addressed to who's agent name, and who is marked departed, so that a
// late Next for it is refused with actions.ErrDeparted. Waiters on every
// machine wake when anything went back. It is idempotent; departing an
// identity that never joined records it as departed.
func (b *Board) Depart(ctx context.Context, who identity.ID) error {
	if _, err := identity.Parse(string(who)); err != nil {
		return fmt.Errorf("depart: %w", err)
	}
	start := time.Now()
	b.mu.Lock()
	delete(b.members, who)
	b.mu.Unlock()
	var released, readdressed []string
	err := b.write(ctx, "depart", func(ctx context.Context, tx pgx.Tx) error {
		var err error
		released, readdressed, err = b.departTx(ctx, tx, who)
		return err
	})
	if err != nil {
		return fmt.Errorf("depart %s: %w", who, err)
	}
	if len(released) > 0 || len(readdressed) > 0 {
		b.listen.broadcast(evClaimable, wakeup.Everyone)
	}
	b.log.Info("member departed", logkey.Identity, string(who), "released", released, "readdressed", readdressed,
		logkey.Elapsed, time.Since(start))
	return nil
}

// departTx departs who inside a transaction: it is marked departed first
// (which locks its row, so a claim for it in flight either commits before
// or sees it departed), then its claims go back to open and the open
// actions addressed to it exactly go to its agent name. It returns the ids
// released and re-addressed, and queues the wake-up when there are any.
func (b *Board) departTx(ctx context.Context, tx pgx.Tx, who identity.ID) (released, readdressed []string, err error) {
	_, err = tx.Exec(ctx, `INSERT INTO bee_members (identity, agent, joined_at, renewed_at, lease_until, departed_at)
		VALUES ($1, $2, `+nowSQL("$3")+`, `+nowSQL("$3")+`, `+nowSQL("$3")+`, `+nowSQL("$3")+`)
		ON CONFLICT (identity) DO UPDATE SET lease_until = least(bee_members.lease_until, `+nowSQL("$3")+`),
			departed_at = coalesce(bee_members.departed_at, `+nowSQL("$3")+`), waiter_at = NULL`,
		string(who), who.Agent(), b.now())
	if err != nil {
		return nil, nil, err
	}
	if released, err = collectIDs(tx.Query(ctx, `UPDATE bee_actions SET state = 'open', holder = '', claimed_at = NULL, rev = `+xid+`
		WHERE state = 'claimed' AND holder = $1 RETURNING seq`, string(who))); err != nil {
		return nil, nil, err
	}
	if readdressed, err = collectIDs(tx.Query(ctx, `UPDATE bee_actions SET to_whom = $2, rev = `+xid+`
		WHERE state = 'open' AND to_whom = $1 RETURNING seq`, string(who), who.Agent())); err != nil {
		return nil, nil, err
	}
	if len(released) > 0 || len(readdressed) > 0 {
		err = b.notify(ctx, tx, evClaimable, wakeup.Everyone)
	}
	return released, readdressed, err
}

// collectIDs turns the seqs a query returns into action ids, in order.
func collectIDs(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	slices.Sort(seqs)
	ids := make([]string, 0, len(seqs))
	for _, s := range seqs {
		ids = append(ids, position.ActionID(s))
	}
	return ids, nil
}

// renewLoop renews, every Options.Renew on the board's clock, the leases
// of the members joined through this Board (idle or not: on a shared
// server a lease that runs out means its bridge is gone), until the Board
// closes. A member found departed elsewhere is no longer renewed. A failed
// renewal is logged and retried at the next tick; a lease is at least two
// renewals long. t is the first tick's timer.
//
// Each tick arms the next before renewing, as a ticker does: renewals keep
// their pace however long a write takes, and a test that advances a manual
// clock once it sees a renewal finds the next tick armed.
func (b *Board) renewLoop(t actions.Timer) {
	defer func() { t.Stop() }()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C():
		}
		t = b.clock.NewTimer(b.opts.Renew)
		b.mu.Lock()
		ids := make([]string, 0, len(b.members))
		for id := range b.members {
			ids = append(ids, string(id))
		}
		b.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		var renewed []string
		err := b.writeWithin(b.ctx, "renew leases", b.opts.Renew, func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `UPDATE bee_members SET lease_until = `+nowSQL("$3")+` + $2 * interval '1 millisecond',
				renewed_at = `+nowSQL("$3")+` WHERE identity = ANY($1) AND departed_at IS NULL RETURNING identity`,
				ids, b.opts.Lease.Milliseconds(), b.now())
			if err != nil {
				return err
			}
			renewed, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Warn("lease renewal failed; retrying at the next tick", logkey.Err, err)
			}
			continue
		}
		if len(renewed) < len(ids) {
			b.mu.Lock()
			for _, id := range ids {
				if !slices.Contains(renewed, id) {
					delete(b.members, identity.ID(id))
					b.log.Info("member departed elsewhere; renewal stops", logkey.Identity, id)
				}
			}
			b.mu.Unlock()
		}
	}
}

// A liveMember is what the board knows of a member to judge whether it
// lives.
type liveMember struct {
	id       string
	departed bool
	hostKey  string
	pid      int
	inLease  bool // its lease has not run out, by the server's clock
}

// live reports whether m speaks for a running bridge: not departed, and,
// on this machine, its process runs; elsewhere, its lease has not run out
// (members renew while they live).
func (b *Board) live(m liveMember) bool {
	if m.departed {
		return false
	}
	if m.hostKey == b.hostKey && m.pid > 0 {
		return processAlive(m.pid)
	}
	return m.inLease
}

// processAlive reports whether process pid runs (signal 0 succeeds, or is
// refused for lack of permission).
func processAlive(pid int) bool { return liveness.Alive(pid) }

// liveCols read a liveMember from bee_members m ($1 is Board.graceMS, $2
// Board.now).
var liveCols = `m.identity, m.departed_at IS NOT NULL, m.host_key, m.pid, ` + leaseEnd("m", "$1") + ` > ` + nowSQL("$2")

// checkLive refuses to as a recipient when it is an identity that is not
// live: nobody could ever claim what is addressed to it. The error names
// the agent's live identities, or suggests its name.
func (b *Board) checkLive(ctx context.Context, to string) error {
	if !identity.IsID(to) {
		return nil
	}
	agent := identity.ID(to).Agent()
	var (
		found bool
		self  liveMember
		alive []string
	)
	err := b.read(ctx, "look up "+to, func(ctx context.Context) error {
		found, alive = false, nil
		rows, err := b.pool.Query(ctx, `SELECT `+liveCols+` FROM bee_members m WHERE m.agent = $3 ORDER BY m.joined_at`,
			b.graceMS(), b.now(), agent)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.hostKey, &m.pid, &m.inLease); err != nil {
				return err
			}
			if m.id == to {
				found, self = true, m
			}
			if b.live(m) {
				alive = append(alive, m.id)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	if found && b.live(self) {
		return nil
	}
	return actions.NotLiveErr(to, found, self.departed, alive)
}

// reap departs the members of this machine whose bridge process has died
// without a word (SIGKILL, a crash): their claims go back and what was
// addressed to them goes to their agent name at once, instead of when a
// lease runs out. Every view calls it first. It writes only when it finds
// one; a failure is logged and left to the next look or the lease.
func (b *Board) reap(ctx context.Context) {
	var dead []identity.ID
	err := b.read(ctx, "look for dead members", func(ctx context.Context) error {
		dead = nil
		rows, err := b.pool.Query(ctx, `SELECT identity, pid FROM bee_members WHERE departed_at IS NULL AND host_key = $1 AND pid > 0`, b.hostKey)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var pid int
			if err := rows.Scan(&id, &pid); err != nil {
				return err
			}
			if !processAlive(pid) && identity.IsID(id) {
				dead = append(dead, identity.ID(id))
			}
		}
		return rows.Err()
	})
	if err != nil || len(dead) == 0 {
		return
	}
	var released, readdressed []string
	err = b.write(ctx, "depart dead members", func(ctx context.Context, tx pgx.Tx) error {
		released, readdressed = nil, nil
		for _, who := range dead {
			// Look again under the row lock: it may have departed or
			// joined again meanwhile.
			var pid int
			var key string
			err := tx.QueryRow(ctx, `SELECT pid, host_key FROM bee_members WHERE identity = $1 AND departed_at IS NULL FOR UPDATE`,
				string(who)).Scan(&pid, &key)
			if errors.Is(err, pgx.ErrNoRows) || (err == nil && (key != b.hostKey || processAlive(pid))) {
				continue
			}
			if err != nil {
				return err
			}
			rel, re, err := b.departTx(ctx, tx, who)
			if err != nil {
				return err
			}
			released, readdressed = append(released, rel...), append(readdressed, re...)
		}
		return nil
	})
	if err != nil {
		b.log.Warn("cannot depart members whose process died; their leases will", logkey.Err, err)
		return
	}
	if len(released) > 0 || len(readdressed) > 0 {
		b.listen.broadcast(evClaimable, wakeup.Everyone)
	}
	b.log.Info("members departed: their processes died", "identities", dead, "released", released, "readdressed", readdressed)
}

// Members implements actions.Board: the live identities (see live), oldest
// first, with the actions each holds and whether its waiter is armed.
// Members of this machine whose process died depart first.
func (b *Board) Members(ctx context.Context) ([]actions.MemberInfo, error) {
	b.reap(ctx)
	var members []actions.MemberInfo
	err := b.read(ctx, "members", func(ctx context.Context) error {
		members = []actions.MemberInfo{}
		rows, err := b.pool.Query(ctx, `SELECT `+liveCols+`, m.agent, m.host, m.claude_pid, m.session_id, m.joined_at, m.renewed_at, m.lease_until,
				coalesce((SELECT array_agg(a.seq ORDER BY a.seq) FROM bee_actions a WHERE a.state = 'claimed' AND a.holder = m.identity), '{}'),
				m.waiter_at
			FROM bee_members m WHERE m.departed_at IS NULL ORDER BY m.joined_at, m.identity`, b.graceMS(), b.now())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				lm                        liveMember
				mi                        actions.MemberInfo
				joined, renewed, leaseEnd time.Time
				held                      []int64
				waiter                    *time.Time
			)
			if err := rows.Scan(&lm.id, &lm.departed, &lm.hostKey, &lm.pid, &lm.inLease, &mi.Agent, &mi.Host, &mi.ClaudePID, &mi.SessionID,
				&joined, &renewed, &leaseEnd, &held, &waiter); err != nil {
				return err
			}
			if !b.live(lm) {
				continue
			}
			mi.ID, mi.PID = identity.ID(lm.id), lm.pid
			mi.JoinedAt, mi.RenewedAt, mi.LeaseUntil = joined.UTC(), renewed.UTC(), leaseEnd.UTC()
			if waiter != nil {
				t := waiter.UTC()
				mi.WaiterSince = &t
			}
			mi.Holding = make([]string, 0, len(held))
			for _, s := range held {
				mi.Holding = append(mi.Holding, position.ActionID(s))
			}
			members = append(members, mi)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	return members, nil
}

// SetWaiter implements actions.Source: it records on who's member row
// whether its session's waiter is armed.
func (b *Board) SetWaiter(ctx context.Context, who identity.ID, armed bool) error {
	err := b.write(ctx, "set waiter", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE bee_members SET waiter_at = CASE WHEN $2 THEN `+nowSQL("$3")+` END
			WHERE identity = $1 AND departed_at IS NULL`, string(who), armed, b.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("set waiter of %s: %w", who, err)
	}
	return nil
}

// markGone sets HolderGone on the claimed records whose holder is not live.
func (b *Board) markGone(ctx context.Context, recs []actions.Record) {
	var holders []string
	for _, r := range recs {
		if r.State == actions.Claimed && !slices.Contains(holders, r.Holder) {
			holders = append(holders, r.Holder)
		}
	}
	if len(holders) == 0 {
		return
	}
	live := map[string]bool{}
	err := b.read(ctx, "look at holders", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, `SELECT `+liveCols+` FROM bee_members m WHERE m.identity = ANY($3)`, b.graceMS(), b.now(), holders)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.hostKey, &m.pid, &m.inLease); err != nil {
				return err
			}
			live[m.id] = b.live(m)
		}
		return rows.Err()
	})
	if err != nil {
		return
	}
	for i := range recs {
		if recs[i].State == actions.Claimed && !live[recs[i].Holder] {
			recs[i].HolderGone = true
		}
	}
}
