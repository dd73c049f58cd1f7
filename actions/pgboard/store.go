package pgboard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
)

// A store is a Board seen by its engine (engine.Store): the reads of the
// database, its transactions (ptx), the listener and the members this
// process renews. It is another type so that its methods are not the
// Board's.
type store Board

var _ engine.Store = (*store)(nil)

func (s *store) b() *Board { return (*Board)(s) }

// Closed implements engine.Store.
func (s *store) Closed() error { return s.b().closed() }

// Cursors implements engine.Store.
func (s *store) Cursors() position.Cursors { return s.b().cursors() }

// Write implements engine.Store: one transaction, retried while the server
// is unreachable, with its commit resolved when its answer is lost (see
// Board.write).
func (s *store) Write(ctx context.Context, op string, fn func(engine.Tx) error) error {
	return s.b().write(ctx, op, func(ctx context.Context, tx pgx.Tx) error { return fn(ptx{b: s.b(), ctx: ctx, tx: tx}) })
}

// Tell implements engine.Store: the transaction has NOTIFYed those e
// concerns already (see ptx.Notify), but for a claim (Changed), which
// those who watch every change hear of on the change channel, coalesced
// (see Board.tellChanged).
func (s *store) Tell(e engine.Event) {
	if e.Kind == engine.Changed {
		s.b().tellChanged()
	}
}

// Action implements engine.Store.
func (s *store) Action(ctx context.Context, seq int64) (actions.Record, error) {
	var rec actions.Record
	err := s.b().read(ctx, "get "+position.ActionID(seq), func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, `SELECT `+everyCols+` FROM bee_every_action WHERE seq = $1`, seq))
		return err
	})
	return rec, noRows(err)
}

// List implements engine.Store: from the hot table alone when every state
// asked for is live, from bee_ended_actions alone when every one has
// ended, else from both (see engine.TablesOf).
func (s *store) List(ctx context.Context, after int64, states []actions.State, limit int) ([]pages.Row, error) {
	table, cols := "bee_every_action", everyCols
	switch engine.TablesOf(states) {
	case engine.LiveTable:
		table, cols = "bee_actions", recordCols
	case engine.EndedTable:
		table, cols = "bee_ended_actions", endedCols
	}
	query := `SELECT ` + cols + ` FROM ` + table + ` WHERE seq > $1 ORDER BY seq LIMIT $2`
	args := []any{after, limit}
	if len(states) > 0 {
		names := make([]string, len(states))
		for i, st := range states {
			names[i] = string(st)
		}
		query = `SELECT ` + cols + ` FROM ` + table + ` WHERE seq > $1 AND state = ANY($3) ORDER BY seq LIMIT $2`
		args = append(args, names)
	}
	return s.page(ctx, "list", false, query, args...)
}

// page reads the rows of query (records, each followed by its rev when
// withRev is set) within pages.MaxBytes.
func (s *store) page(ctx context.Context, op string, withRev bool, query string, args ...any) ([]pages.Row, error) {
	var out []pages.Row
	err := s.b().read(ctx, op, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = pages.Read(rows, withRev, func(extra ...any) (actions.Record, error) { return scanRecord(rows, extra...) })
		return err
	})
	return out, err
}

// Known implements engine.Store.
func (s *store) Known(ctx context.Context, seqs []int64) ([]int64, error) {
	var known []int64
	err := s.b().read(ctx, "await", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT seq FROM bee_every_action WHERE seq = ANY($1)`, seqs)
		if err != nil {
			return err
		}
		known, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	return known, err
}

// EndedAmong implements engine.Store.
func (s *store) EndedAmong(ctx context.Context, seqs []int64) ([]actions.Record, error) {
	var recs []actions.Record
	err := s.b().read(ctx, "await", func(ctx context.Context) error {
		var err error
		recs, err = collect(s.pool.Query(ctx, `SELECT `+endedCols+` FROM bee_ended_actions WHERE seq = ANY($1)
			ORDER BY seq`, seqs))
		return err
	})
	return recs, err
}

// openFor is the one place the PostgreSQL board says which open actions a
// claimant may take (see engine.Want): $2 holds its recipients, $3 the
// seqs to skip, $1 is the claimant (an action held back from it is not
// for it: held_by is empty or the claimant). Claims take them in
// (priority, seq) order (see Take).
const openFor = `state = 'open' AND to_whom = ANY($2) AND NOT (seq = ANY($3)) AND held_by IN ('', $1)`

// Look implements engine.Store: whether an action w may take exists, a
// claim's holder is gone or a lease has run out, by the board's time.
func (s *store) Look(ctx context.Context, w engine.Want) (engine.Look, error) {
	var (
		l        engine.Look
		expiry   *time.Time
		departed *bool
	)
	err := s.b().read(ctx, "look for actions", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM bee_actions WHERE `+openFor+`),
			EXISTS (SELECT 1 FROM bee_actions a WHERE a.state = 'claimed' AND a.holder <> $1
				AND NOT EXISTS (SELECT 1 FROM bee_members m WHERE m.identity = a.holder AND m.departed_at IS NULL)),
			(SELECT min(`+leaseEnd("m", "$4")+`) FROM bee_members m WHERE m.departed_at IS NULL AND m.identity <> $1),
			greatest((SELECT coalesce(max(seq), 0) FROM bee_actions), (SELECT coalesce(max(seq), 0) FROM bee_ended_actions)),
			(SELECT departed_at IS NOT NULL FROM bee_members WHERE identity = $1),
			`+nowSQL("$5"),
			string(w.Who), w.Recipients(), w.Skip, s.b().graceMS(), s.b().now()).
			Scan(&l.Claimable, &l.Reclaim, &expiry, &l.Head, &departed, &l.Now)
	})
	if err != nil {
		return engine.Look{}, err
	}
	l.At = s.clock.Now()
	if expiry != nil {
		l.Expiry = *expiry
		l.Reclaim = l.Reclaim || !expiry.After(l.Now)
	}
	l.Departed = departed != nil && *departed
	return l, nil
}

// Untold implements engine.Store.
func (s *store) Untold(ctx context.Context, who identity.ID) (int64, error) {
	var seq int64
	err := s.b().read(ctx, "look for outcomes", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, untold, string(who), identity.Prefix+who.Agent()+"#").Scan(&seq)
	})
	return seq, noRows(err)
}

// Processes implements engine.Store: the members of this machine, read
// at most processesFresh ago. The engine reaps before every look, which
// on PostgreSQL was a round trip of its own before every claim; the pids
// it judges are checked afresh each time, so a list a moment old misses
// only a member that joined through another Board within that moment.
// Every departure, join and reap through this Board reads it afresh.
func (s *store) Processes(ctx context.Context) ([]engine.Process, error) {
	if procs, ok := s.procs.get(); ok {
		return procs, nil
	}
	var procs []engine.Process
	err := s.b().read(ctx, "look for dead members", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT identity, pid FROM bee_members WHERE departed_at IS NULL AND host_key = $1 AND pid > 0`, s.hostKey)
		if err != nil {
			return err
		}
		procs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.Process, error) {
			var p engine.Process
			err := row.Scan(&p.ID, &p.PID)
			return p, err
		})
		procs = slices.DeleteFunc(procs, func(p engine.Process) bool { return !identity.IsID(string(p.ID)) })
		return err
	})
	if err == nil {
		s.procs.put(procs)
	}
	return procs, err
}

// processesFresh is how long Processes answers from the list it read.
const processesFresh = 100 * time.Millisecond

// A procCache is the list of this machine's members Processes read last.
type procCache struct {
	mu    sync.Mutex
	at    time.Time // when it was read; zero when it must be read again
	procs []engine.Process
}

func (c *procCache) get() ([]engine.Process, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= processesFresh {
		return nil, false
	}
	return slices.Clone(c.procs), true
}

func (c *procCache) put(procs []engine.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.procs = time.Now(), slices.Clone(procs)
}

// forget makes the next Processes read the list afresh.
func (c *procCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}

// memberRows reads the member rows m where judges (its parameters after
// $1 and $2, see liveCols, are args), with each one's life.
func (s *store) memberRows(ctx context.Context, op, where string, args ...any) ([]memberRow, error) {
	var out []memberRow
	err := s.b().read(ctx, op, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT `+liveCols+` FROM bee_members m WHERE `+where,
			append([]any{s.b().graceMS(), s.b().now()}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.hostKey, &m.pid, &m.inLease); err != nil {
				return err
			}
			out = append(out, memberRow{m, s.b().live(m)})
		}
		return rows.Err()
	})
	return out, err
}

// A memberRow is a member as memberRows reads it.
type memberRow struct {
	liveMember
	live bool
}

// Alive implements engine.Store.
func (s *store) Alive(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := s.memberRows(ctx, "look at holders", `m.identity = ANY($3)`, ids)
	return aliveOf(rows), err
}

// AgentMembers implements engine.Store.
func (s *store) AgentMembers(ctx context.Context, agent string) ([]engine.MemberLife, error) {
	rows, err := s.memberRows(ctx, "look up "+agent, `m.agent = $3 ORDER BY m.joined_at`, agent)
	return lifeOf(rows), err
}

// aliveOf is whether each member of rows is live.
func aliveOf(rows []memberRow) map[string]bool {
	live := make(map[string]bool, len(rows))
	for _, r := range rows {
		live[r.id] = r.live
	}
	return live
}

// lifeOf is rows as the engine reads them.
func lifeOf(rows []memberRow) []engine.MemberLife {
	out := make([]engine.MemberLife, 0, len(rows))
	for _, r := range rows {
		out = append(out, engine.MemberLife{ID: r.id, Departed: r.departed, Live: r.live})
	}
	return out
}

// Joined implements engine.Store: this Board renews m's lease.
func (s *store) Joined(m actions.Member) {
	s.procs.forget()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[m.ID] = m
}

// Departing implements engine.Store: this Board stops renewing who.
func (s *store) Departing(who identity.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members, who)
}

// Holding implements engine.Store: every member renews, idle or not.
func (s *store) Holding(identity.ID, int) {}

// Shutdown implements engine.Store: the listener and the renewer end,
// then the pool closes.
func (s *store) Shutdown() error {
	s.life.Wait()
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}
