package pgboard

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
)

// leaseEnd is the end of the lease of the member row m, on the board's
// clock ($grace is Board.graceMS): never sooner than a lease after the
// server started, so that a restart gives every member the time to renew.
// The server's start is on the server's clock; the skew in $grace puts it
// on the board's.
func leaseEnd(m, grace string) string {
	return `greatest(` + m + `.lease_until, pg_postmaster_start_time() + ` + grace + ` * interval '1 millisecond')`
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
//
// A renewal's write may take up to Renew, and never less than
// renewWriteFloor of real time: a short Renew (a test's, on a manual clock)
// must not make a renewal fail on a loaded machine only because the write
// took a second, since nothing retries it before the next tick.
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
		err := b.writeWithin(b.ctx, "renew leases", max(b.opts.Renew, renewWriteFloor), func(ctx context.Context, tx pgx.Tx) error {
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

// renewWriteFloor is the least time a lease renewal's write is given.
const renewWriteFloor = 5 * time.Second

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

// Members implements engine.Store: the live identities (see live), oldest
// first, with the actions each holds and whether its waiter is armed.
func (s *store) Members(ctx context.Context) ([]actions.MemberInfo, error) {
	b := s.b()
	var members []actions.MemberInfo
	err := b.read(ctx, "members", func(ctx context.Context) error {
		members = []actions.MemberInfo{}
		rows, err := b.pool.Query(ctx, `SELECT `+liveCols+`, m.agent, m.host, m.claude_pid, m.session_id, m.joined_at, m.renewed_at, m.lease_until,
				coalesce((SELECT array_agg(a.seq ORDER BY a.seq) FROM bee_actions a WHERE a.state = 'claimed' AND a.holder = m.identity), '{}'),
				m.waiter_at, m.client
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
				&joined, &renewed, &leaseEnd, &held, &waiter, &mi.Client); err != nil {
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
		return nil, err
	}
	return members, nil
}
