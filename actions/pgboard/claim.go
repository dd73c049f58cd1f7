package pgboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// reclaimLock is the advisory lock key of reclaiming ("bee" and 2): one
// claimer at a time departs the members whose lease ran out, so that two
// never lock those rows in different orders.
const reclaimLock = 0x62656502

// A look is what a waiter learns from one read.
type look struct {
	claimable bool      // an open action who may take exists
	reclaim   bool      // a lease has run out, or a claim's holder is gone
	expiry    time.Time // the earliest lease end among other live members; zero for none
	now       time.Time // the board's time at the look (the server's clock by default)
	at        time.Time // b.clock's time right after the look, to time the wait for expiry
	head      int64     // the highest seq posted
	departed  bool      // who has departed
}

// recipients are the to_whom values who may take: anyone, its agent, itself.
func recipients(who identity.ID) []string { return []string{"", who.Agent(), string(who)} }

// peek looks, without writing, whether a claim could succeed now and when
// a lease will next run out.
func (b *Board) peek(ctx context.Context, who identity.ID, skip []int64) (look, error) {
	var (
		l        look
		expiry   *time.Time
		departed *bool
	)
	err := b.read(ctx, "look for actions", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM bee_actions WHERE state = 'open' AND to_whom = ANY($2) AND NOT (seq = ANY($3))),
			EXISTS (SELECT 1 FROM bee_actions a WHERE a.state = 'claimed' AND a.holder <> $1
				AND NOT EXISTS (SELECT 1 FROM bee_members m WHERE m.identity = a.holder AND m.departed_at IS NULL)),
			(SELECT min(`+leaseEnd("m", "$4")+`) FROM bee_members m WHERE m.departed_at IS NULL AND m.identity <> $1),
			(SELECT coalesce(max(seq), 0) FROM bee_actions),
			(SELECT departed_at IS NOT NULL FROM bee_members WHERE identity = $1),
			`+nowSQL("$5"),
			string(who), recipients(who), skip, b.graceMS(), b.now()).
			Scan(&l.claimable, &l.reclaim, &expiry, &l.head, &departed, &l.now)
	})
	if err != nil {
		return look{}, err
	}
	l.at = b.clock.Now()
	if expiry != nil {
		l.expiry = *expiry
		if !expiry.After(l.now) {
			l.reclaim = true
		}
	}
	l.departed = departed != nil && *departed
	return l, nil
}

// sleepFor is how long a waiter that found nothing may sleep on the wall
// clock: until its deadline or the safety poll, whichever is first.
func (b *Board) sleepFor(ctx context.Context) time.Duration {
	return max(min(time.Until(deadlineOf(ctx)), b.opts.SafetyPoll), time.Millisecond)
}

// expiryTimer returns a timer on the board's clock that fires when the
// next lease end the look saw has passed, or nil when it saw none. The
// lease end is on the board's time (the server's clock by default), so the
// wait is measured from the look's own now, less what b.clock says has
// passed since.
func (b *Board) expiryTimer(l look) actions.Timer {
	if l.expiry.IsZero() {
		return nil
	}
	return b.clock.NewTimer(l.expiry.Sub(l.now) - b.clock.Now().Sub(l.at) + time.Millisecond)
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d
}

// claim, in one transaction, locks who's member row (joining who when it
// never joined; ErrDeparted when it has departed), departs the members
// whose lease ran out and gives back claims whose holder is gone (when the
// look saw any), and claims the oldest open action who may take that is
// not in skip, skipping rows other claimers hold locked. ok is false when
// there was nothing to take.
func (b *Board) claim(ctx context.Context, who identity.ID, l look, skip []int64) (rec actions.Record, ok bool, err error) {
	var (
		joined    bool
		reclaimed []string
	)
	err = b.write(ctx, "claim", func(ctx context.Context, tx pgx.Tx) error {
		rec, ok, joined, reclaimed = actions.Record{}, false, false, nil
		var departed bool
		err := tx.QueryRow(ctx, `SELECT departed_at IS NOT NULL FROM bee_members WHERE identity = $1 FOR SHARE`, string(who)).Scan(&departed)
		if errors.Is(err, pgx.ErrNoRows) {
			if err := b.joinTx(ctx, tx, who); err != nil {
				return err
			}
			joined = true
			err = tx.QueryRow(ctx, `SELECT departed_at IS NOT NULL FROM bee_members WHERE identity = $1 FOR SHARE`, string(who)).Scan(&departed)
		}
		if err != nil {
			return err
		}
		if departed {
			return fmt.Errorf("next for %s: %w; join it again or use a new identity", who, actions.ErrDeparted)
		}
		if l.reclaim {
			if reclaimed, err = b.reclaimTx(ctx, tx, who); err != nil {
				return err
			}
		}
		// Walk the open actions in posting order and stop at the first this
		// claimant may take and nobody holds locked. With statistics that
		// lag a burst of posts, the planner would rather fetch every open
		// action and sort it at each claim.
		if _, err := tx.Exec(ctx, `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)`); err != nil {
			return err
		}
		rec, err = scanRecord(tx.QueryRow(ctx, `WITH c AS (
				SELECT seq FROM bee_actions WHERE state = 'open' AND to_whom = ANY($2) AND NOT (seq = ANY($3))
				ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
			UPDATE bee_actions a SET state = 'claimed', holder = $1, claimed_at = `+nowSQL("$4")+`, rev = `+xid+`
			FROM c WHERE a.seq = c.seq RETURNING `+recordColsOf("a"), string(who), recipients(who), skip, b.now()))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		if b.opts.inClaim != nil {
			b.opts.inClaim(tx.Conn().PgConn().PID())
		}
		return b.notify(ctx, tx, evChanged, wakeup.Everyone)
	})
	if err != nil {
		return actions.Record{}, false, err
	}
	if len(reclaimed) > 0 {
		b.log.Info("claims reclaimed: their holders' leases ran out or they departed", logkey.ActionIDs, reclaimed)
		b.listen.broadcast(evClaimable, wakeup.Everyone)
	}
	if joined {
		b.log.Info("member joined by its first claim", logkey.Identity, string(who))
		b.mu.Lock()
		b.members[who] = actions.Member{ID: who}
		b.mu.Unlock()
	}
	if !ok {
		return actions.Record{}, false, nil
	}
	b.listen.broadcast(evChanged, wakeup.Everyone)
	b.log.Info("action claimed", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return rec, true, nil
}

// reclaimTx, unless another claimer is at it, departs the members other
// than who whose lease ran out (what was addressed to them goes to their
// agent name) and puts back to open every claim whose holder is not a live
// member. It returns the ids that went back.
func (b *Board) reclaimTx(ctx context.Context, tx pgx.Tx, who identity.ID) ([]string, error) {
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, reclaimLock).Scan(&mine); err != nil || !mine {
		return nil, err
	}
	rows, err := tx.Query(ctx, `UPDATE bee_members m SET departed_at = `+nowSQL("$3")+`, waiter_at = NULL
		WHERE m.departed_at IS NULL AND m.identity <> $1 AND `+leaseEnd("m", "$2")+` <= `+nowSQL("$3")+` RETURNING identity`,
		string(who), b.graceMS(), b.now())
	if err != nil {
		return nil, err
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(dead) > 0 {
		b.log.Info("members departed: their leases ran out", "identities", dead)
	}
	readdressed, err := collectIDs(tx.Query(ctx, `UPDATE bee_actions a SET to_whom = m.agent, rev = `+xid+`
		FROM bee_members m WHERE a.state = 'open' AND a.to_whom = m.identity AND m.identity = ANY($1)`+` RETURNING a.seq`, dead))
	if err != nil {
		return nil, err
	}
	released, err := collectIDs(tx.Query(ctx, `UPDATE bee_actions a SET state = 'open', holder = '', claimed_at = NULL, rev = `+xid+`
		WHERE a.state = 'claimed' AND a.holder <> $1
		AND NOT EXISTS (SELECT 1 FROM bee_members m WHERE m.identity = a.holder AND m.departed_at IS NULL) RETURNING a.seq`, string(who)))
	if err != nil {
		return nil, err
	}
	back := append(released, readdressed...)
	if len(back) > 0 {
		err = b.notify(ctx, tx, evClaimable, wakeup.Everyone)
	}
	return back, err
}

// giveBack releases a claim whose caller has gone away and returns the
// caller's error (joined with the release's, should that fail: then the
// claim stays held until who departs or its lease runs out).
func (b *Board) giveBack(ctx context.Context, who identity.ID, rec actions.Record) error {
	_, err := b.Release(context.WithoutCancel(ctx), who, rec.ID)
	if err != nil {
		b.log.Error("cannot give back a claim nobody received", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Err, err)
		return errors.Join(ctx.Err(), fmt.Errorf("give back %s: %w", rec.ID, err))
	}
	b.log.Info("claim given back: the caller went away", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return ctx.Err()
}

// Next implements actions.Source. It waits for the oldest open action who
// may take (addressed to anyone, to who's agent name, or to who), claims it
// for who in one transaction and returns it. Before claiming it puts back
// to open every claim whose holder's lease has run out.
//
// It returns within timeout: on timeout the page has no records. While the
// server is unreachable it keeps trying within timeout and then finds
// nothing. A non-positive timeout looks once. When ctx ends first Next
// returns ctx's error, and when ctx ends just as the claim commits, Next
// gives the claim back before returning ctx's error.
//
// The cursor marks how far the posting order had reached; after is checked
// (actions.ErrBadCursor) but does not filter. who must be an identity; if
// it has not joined, Next joins it for this process. If it has departed,
// Next returns actions.ErrDeparted.
func (b *Board) Next(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	head, err := b.cursors().ParseSeq(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	n, ok, err := b.wait(ctx, "next", who, nil, timeout, false)
	if l := n.head; l > head {
		head = l
	}
	switch {
	case err != nil:
		return actions.Page{}, err
	case !ok:
		return actions.Page{Records: []actions.Record{}, Cursor: b.cursors().Seq(head)}, nil
	}
	return actions.Page{Records: []actions.Record{n.Record}, Cursor: b.cursors().Seq(max(head, n.Record.Seq))}, nil
}

// A found is what wait found: a notice, and how far the posting order had
// reached.
type found struct {
	actions.Notice
	head int64
}

// wait is Next (outcomes false) and Notice (outcomes true): it looks, and
// sleeps until a change or the safety poll, until it has claimed an action
// (or, for Notice, told an outcome) or timeout passes.
func (b *Board) wait(ctx context.Context, op string, who identity.ID, skip []int64, timeout time.Duration, outcomes bool) (found, bool, error) {
	once := timeout <= 0
	if once {
		timeout = b.opts.Retry
	}
	if skip == nil {
		skip = []int64{}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var f found
	fail := func(err error) (found, bool, error) {
		switch {
		case ctx.Err() != nil:
			return f, false, ctx.Err()
		case b.ctx.Err() != nil:
			return f, false, b.closed()
		case wctx.Err() != nil:
			return f, false, nil
		case errors.Is(err, actions.ErrDeparted):
			return f, false, err
		}
		return f, false, fmt.Errorf("%s for %s: %w", op, who, err)
	}
	if err := b.closed(); err != nil {
		return f, false, err
	}
	for {
		wake, ended := b.listen.wakeCh(who.Agent()), b.listen.endedCh(who.Agent(), false) // before looking, so no change is missed
		b.reap(wctx)
		if outcomes {
			rec, ok, err := b.takeOutcome(wctx, who)
			if err != nil {
				return fail(err)
			}
			if ok {
				f.Notice = actions.Notice{Kind: actions.NoticeOutcome, Record: rec}
				return f, true, nil
			}
		}
		l, err := b.peek(wctx, who, skip)
		if err != nil {
			return fail(err)
		}
		f.head = max(f.head, l.head)
		if l.departed {
			return f, false, fmt.Errorf("%s for %s: %w; join it again or use a new identity", op, who, actions.ErrDeparted)
		}
		if l.claimable || l.reclaim {
			rec, ok, err := b.claim(wctx, who, l, skip)
			if err != nil {
				return fail(err)
			}
			if ok {
				if b.opts.afterClaim != nil {
					b.opts.afterClaim(rec)
				}
				if ctx.Err() != nil {
					return f, false, b.giveBack(ctx, who, rec)
				}
				f.Notice = actions.Notice{Kind: actions.NoticeWork, Record: rec}
				return f, true, nil
			}
		}
		if once {
			return f, false, nil
		}
		if b.opts.beforeSleep != nil {
			b.opts.beforeSleep()
		}
		t := time.NewTimer(b.sleepFor(wctx))
		var leaseEnd <-chan time.Time
		lt := b.expiryTimer(l)
		if lt != nil {
			leaseEnd = lt.C()
		}
		endedCh := ended
		if !outcomes {
			endedCh = nil
		}
		select {
		case <-wake:
		case <-endedCh:
		case <-leaseEnd:
		case <-t.C:
		case <-wctx.Done():
		case <-b.ctx.Done():
		}
		t.Stop()
		if lt != nil {
			lt.Stop()
		}
		if wctx.Err() != nil || b.ctx.Err() != nil {
			return fail(wctx.Err())
		}
	}
}

// Notice implements actions.Source. Each look departs members of this
// machine whose process died, then looks for an outcome who should hear,
// then for an action who may take that is not in skip, which it claims as
// Next does. Between looks it sleeps until a post, release or end on any
// machine, a lease running out, or the safety poll.
func (b *Board) Notice(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (actions.Notice, bool, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Notice{}, false, fmt.Errorf("notice: %w", err)
	}
	seqs := make([]int64, 0, len(skip))
	for _, id := range skip {
		if seq, ok := position.ParseActionID(id); ok {
			seqs = append(seqs, seq)
		}
	}
	if timeout <= 0 {
		timeout = time.Millisecond
	}
	f, ok, err := b.wait(ctx, "notice", who, seqs, timeout, true)
	if err != nil || !ok {
		return actions.Notice{}, false, err
	}
	return f.Notice, true, nil
}

// untold finds the oldest ended action whose outcome who ($1) should hear
// and nobody has been told of: posted by who, or by a departed identity of
// who's agent ($2 is "agent:<name>#").
const untold = `SELECT seq FROM bee_actions WHERE told_at IS NULL AND state IN ('done', 'failed', 'cancelled')
	AND (from_whom = $1 OR (starts_with(from_whom, $2)
		AND from_whom IN (SELECT identity FROM bee_members WHERE departed_at IS NOT NULL)))
	ORDER BY rev, seq LIMIT 1`

// takeOutcome marks told, and returns, an outcome who should hear. It reads
// first, so that idle looks do not write.
func (b *Board) takeOutcome(ctx context.Context, who identity.ID) (actions.Record, bool, error) {
	prefix := identity.Prefix + who.Agent() + "#"
	var seq int64
	err := b.read(ctx, "look for outcomes", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, untold, string(who), prefix).Scan(&seq)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return actions.Record{}, false, nil
	}
	if err != nil {
		return actions.Record{}, false, err
	}
	var rec actions.Record
	found := false
	err = b.write(ctx, "tell outcome", func(ctx context.Context, tx pgx.Tx) error {
		var err error
		rec, err = scanRecord(tx.QueryRow(ctx, `UPDATE bee_actions SET told_at = `+nowSQL("$3")+`
			WHERE seq = (`+untold+` FOR UPDATE SKIP LOCKED) RETURNING `+recordCols, string(who), prefix, b.now()))
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return actions.Record{}, false, err
	}
	b.log.Info("outcome told", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, true, nil
}
