package board

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
)

// store is the Board as its engine sees it (engine.Store), under another
// type so that these methods stay out of the Board's API: the file's
// reads, its write transaction (wtx), the notify files, and the renewals
// of this process's members.
type store Board

func (s *store) b() *Board { return (*Board)(s) }

var _ engine.Store = (*store)(nil)

// Closed implements engine.Store (see Board.closed).
func (s *store) Closed() error { return s.b().closed() }

// Cursors implements engine.Store.
func (s *store) Cursors() position.Cursors { return s.b().cursors() }

// Write implements engine.Store: one write transaction under the write
// lock (see Board.write).
func (s *store) Write(ctx context.Context, op string, fn func(engine.Tx) error) error {
	return s.b().write(ctx, op, func(t wtx) error { return fn(t) })
}

// Tell implements engine.Store: it touches the notify file of e.
func (s *store) Tell(e engine.Event) {
	if s.notify != nil {
		s.notify.tell(e)
	}
}

// Action implements engine.Store.
func (s *store) Action(ctx context.Context, seq int64) (actions.Record, error) {
	var rec actions.Record
	err := s.b().read(ctx, "get "+position.ActionID(seq), func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(s.b().row(ctx, selectAction, seq))
		return err
	})
	return rec, noRows(err)
}

// List implements engine.Store: from the hot table alone when every state
// asked for is live, from ended_actions alone when every one has ended,
// else from both (see engine.TablesOf).
func (s *store) List(ctx context.Context, after int64, states []actions.State, limit int) ([]pages.Row, error) {
	table, cols := "every_action", everyCols
	switch engine.TablesOf(states) {
	case engine.LiveTable:
		table, cols = "actions", recordCols
	case engine.EndedTable:
		table, cols = "ended_actions", recordColsOf("ended_actions")
	}
	query := `SELECT ` + cols + ` FROM ` + table + ` WHERE seq > ? ORDER BY seq LIMIT ?`
	args := []any{after, limit}
	if len(states) > 0 {
		// One placeholder per state: a handful of statements in the cache.
		query = `SELECT ` + cols + ` FROM ` + table + ` WHERE seq > ? AND state IN (?` + strings.Repeat(", ?", len(states)-1) + `)
			ORDER BY seq LIMIT ?`
		args = []any{after}
		for _, st := range states {
			args = append(args, string(st))
		}
		args = append(args, limit)
	}
	return s.page(ctx, "list", false, query, args...)
}

// page reads the rows of query (records, each followed by its rev when
// withRev is set) within pages.MaxBytes.
func (s *store) page(ctx context.Context, op string, withRev bool, query string, args ...any) ([]pages.Row, error) {
	var out []pages.Row
	err := s.b().read(ctx, op, func(ctx context.Context) error {
		rows, err := s.b().rows(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = pages.Read(rows, withRev, func(extra ...any) (actions.Record, error) { return scanRecord(rows, extra...) })
		return err
	})
	return out, err
}

// Head implements engine.Store: the highest rev written (writes are
// serialized, so every later change has a higher one).
func (s *store) Head(ctx context.Context) (int64, error) {
	var rev int64
	err := s.b().read(ctx, "head", func(ctx context.Context) error {
		return s.b().row(ctx, `SELECT `+nextRev+` - 1`).Scan(&rev)
	})
	return rev, err
}

// ChangesAfter implements engine.Store.
func (s *store) ChangesAfter(ctx context.Context, rev, seq int64, limit int) ([]pages.Row, time.Duration, error) {
	rows, err := s.page(ctx, "changes", true, `SELECT `+everyCols+`, rev FROM every_action
		WHERE (rev, seq) > (?, ?) ORDER BY rev, seq LIMIT ?`, rev, seq, limit)
	return rows, 0, err
}

// seqList is seqs as a JSON array, for json_each.
func seqList(seqs []int64) string {
	if len(seqs) == 0 {
		return "[]"
	}
	data, _ := json.Marshal(seqs)
	return string(data)
}

// Known implements engine.Store.
func (s *store) Known(ctx context.Context, seqs []int64) ([]int64, error) {
	var known []int64
	err := s.b().read(ctx, "await", func(ctx context.Context) error {
		rows, err := s.b().rows(ctx, `SELECT seq FROM every_action WHERE seq IN (SELECT value FROM json_each(?))`, seqList(seqs))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				return err
			}
			known = append(known, seq)
		}
		return rows.Err()
	})
	return known, err
}

// EndedAmong implements engine.Store.
func (s *store) EndedAmong(ctx context.Context, seqs []int64) ([]actions.Record, error) {
	rows, err := s.page(ctx, "await", false, `SELECT `+recordColsOf("ended_actions")+` FROM ended_actions
		WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq`, seqList(seqs))
	recs := make([]actions.Record, 0, len(rows))
	for _, r := range rows {
		recs = append(recs, r.Record)
	}
	return recs, err
}

// lookSQL is Look's one read (?1 is who, ?2 its agent, ?3 the skip list).
var lookSQL = `SELECT (` + oldestFor("?1", "?2", "?3") + `) IS NOT NULL, (` + earliestLease + `),
	max(coalesce((SELECT max(seq) FROM actions), 0), coalesce((SELECT max(seq) FROM ended_actions), 0)),
	(SELECT departed_at IS NOT NULL FROM members WHERE identity = ?1),
	(SELECT lease_until FROM members WHERE identity = ?1)`

// Look implements engine.Store: one read of whether w's claim could
// succeed now, when a lease next runs out, and w.Who's own row (for the
// one-statement claim, see wtx.Claimant).
func (s *store) Look(ctx context.Context, w engine.Want) (engine.Look, error) {
	var (
		claimable     bool
		head          int64
		expiry, lease sql.NullInt64
		departed      sql.NullBool
	)
	err := s.b().read(ctx, "look for actions", func(ctx context.Context) error {
		return s.b().row(ctx, lookSQL, string(w.Who), w.Who.Agent(), seqList(w.Skip)).Scan(&claimable, &expiry, &head, &departed, &lease)
	})
	if err != nil {
		return engine.Look{}, err
	}
	now := s.clock.Now()
	l := engine.Look{Claimable: claimable, Head: head, Now: now, At: now,
		Departed: departed.Valid && departed.Bool, Member: departed.Valid && !departed.Bool, Lease: fromMS(lease.Int64)}
	if expiry.Valid {
		// 0 would mean "none"; an unknown holder's claim is already expired.
		ms := max(expiry.Int64, 1)
		l.Expiry, l.Reclaim = fromMS(ms), ms <= now.UnixMilli()
	}
	return l, nil
}

// Untold implements engine.Store.
func (s *store) Untold(ctx context.Context, who identity.ID) (int64, error) {
	var seq int64
	err := s.b().read(ctx, "look for outcomes", func(ctx context.Context) error {
		return s.b().row(ctx, untold, string(who), agentPrefix(who)).Scan(&seq)
	})
	return seq, noRows(err)
}

// agentPrefix is what the identities of who's agent start with.
func agentPrefix(who identity.ID) string { return identity.Prefix + who.Agent() + "#" }

// Processes implements engine.Store: every member of the file runs on
// this machine.
func (s *store) Processes(ctx context.Context) ([]engine.Process, error) {
	var procs []engine.Process
	err := s.b().read(ctx, "look for dead members", func(ctx context.Context) error {
		rows, err := s.b().rows(ctx, `SELECT identity, pid FROM members WHERE departed_at IS NULL AND pid > 0`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p engine.Process
			if err := rows.Scan(&p.ID, &p.PID); err != nil {
				return err
			}
			if identity.IsID(string(p.ID)) {
				procs = append(procs, p)
			}
		}
		return rows.Err()
	})
	return procs, err
}

// liveMember is what the board knows of a member to judge whether it lives.
type liveMember struct {
	id       string
	departed bool
	pid      int
	lease    int64
}

// live reports whether m speaks for a running bridge: not departed, and its
// process runs (or, when the process cannot be seen, its lease has not run
// out).
func (m liveMember) live(now int64) bool {
	if m.departed {
		return false
	}
	if m.pid > 0 {
		return processAlive(m.pid)
	}
	return m.lease > now
}

// members reads the member rows where (its arguments args) judges, as
// each is found, with each one's life.
func (s *store) members(ctx context.Context, op, where string, each func(m liveMember, live bool), args ...any) error {
	return s.b().read(ctx, op, func(ctx context.Context) error {
		rows, err := s.b().rows(ctx, `SELECT identity, departed_at IS NOT NULL, pid, lease_until FROM members WHERE `+where, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		now := s.b().nowMS()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.pid, &m.lease); err != nil {
				return err
			}
			each(m, m.live(now))
		}
		return rows.Err()
	})
}

// Alive implements engine.Store.
func (s *store) Alive(ctx context.Context, ids []string) (map[string]bool, error) {
	data, _ := json.Marshal(ids)
	live := map[string]bool{}
	err := s.members(ctx, "look at holders", `identity IN (SELECT value FROM json_each(?))`,
		func(m liveMember, ok bool) { live[m.id] = ok }, string(data))
	return live, err
}

// AgentMembers implements engine.Store.
func (s *store) AgentMembers(ctx context.Context, agent string) ([]engine.MemberLife, error) {
	var out []engine.MemberLife
	err := s.members(ctx, "look up "+agent, `agent = ? ORDER BY joined_at`,
		func(m liveMember, ok bool) {
			out = append(out, engine.MemberLife{ID: m.id, Departed: m.departed, Live: ok})
		}, agent)
	return out, err
}

// Joined implements engine.Store: this Board renews m's lease.
func (s *store) Joined(m actions.Member) { s.b().startRenewal(m) }

// Departing implements engine.Store: this Board stops renewing who.
func (s *store) Departing(who identity.ID) { s.b().stopRenewal(who) }

// Holding implements engine.Store: who's lease is renewed while it holds a
// claim made through this Board.
func (s *store) Holding(who identity.ID, n int) { s.b().addHeld(who, n) }

// Shutdown implements engine.Store: the watchers stop, the goroutines end,
// then the lock and the database close. Close never waits for another
// process: a write of this process in progress ends with its transaction,
// and a lock request queued in the kernel is left to give the lock back
// once granted.
func (s *store) Shutdown() error {
	b := s.b()
	var errs []error
	if b.notify != nil {
		errs = append(errs, b.notify.close())
	}
	if b.fwatch != nil {
		errs = append(errs, b.fwatch.close())
	}
	b.life.Wait()
	if b.lock != nil {
		// Waits for a write in progress; no write starts afterwards.
		errs = append(errs, b.lock.close())
	}
	errs = append(errs, b.wstmts.close(), b.rstmts.close())
	if b.wconn != nil {
		errs = append(errs, b.wconn.Close())
	}
	if b.db != nil {
		errs = append(errs, b.db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close board %s: %w", b.path, err)
	}
	return nil
}
