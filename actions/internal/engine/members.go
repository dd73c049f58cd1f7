package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Join implements actions.Source: the member's identity is live, with a
// lease the store renews while the member lives (see each board's
// Options.Renew), until Depart or Close. Joining again updates the
// member's pids and session and, after a Depart, makes the identity live
// again. m.ID must be an identity.
func (e *Engine) Join(ctx context.Context, m actions.Member) error {
	if _, err := identity.Parse(string(m.ID)); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	if err := e.write(ctx, "join", func(t *txn) error { return t.Join(m) }); err != nil {
		return fmt.Errorf("join %s: %w", m.ID, err)
	}
	e.s.Joined(m)
	e.log.Info("member joined", logkey.Identity, string(m.ID), logkey.ClaudePID, m.ClaudePID, logkey.SessionID, m.SessionID)
	return nil
}

// Depart implements actions.Source. In one transaction the claims who
// holds go back to open, the open actions addressed to who exactly are
// re-addressed to who's agent name (so the agent's next identity receives
// them), and who is marked departed, so that a late Next for it is refused
// with actions.ErrDeparted. Waiters in every process wake when anything
// went back. It is fast (one short write transaction) and idempotent;
// departing an identity that never joined records it as departed.
func (e *Engine) Depart(ctx context.Context, who identity.ID) error {
	if _, err := identity.Parse(string(who)); err != nil {
		return fmt.Errorf("depart: %w", err)
	}
	start := time.Now()
	e.forgetHot(who)
	e.s.Departing(who)
	var released, readdressed []string
	err := e.write(ctx, "depart", func(t *txn) error {
		var err error
		released, readdressed, err = e.departTx(t, who)
		return err
	})
	if err != nil {
		return fmt.Errorf("depart %s: %w", who, err)
	}
	e.log.Info("member departed", logkey.Identity, string(who), keyReleased, released, keyReaddressed, readdressed,
		logkey.Elapsed, time.Since(start))
	return nil
}

// departTx departs who inside t (see Tx.Depart) and wakes everyone when
// anything went back. It is the one place every departure passes: Depart
// (a clean end, a /clear's retire), the reap of a member whose process
// died, and the loss of a lease; what must go with a departure in the
// same transaction (dropping what who reserved) belongs here.
func (e *Engine) departTx(t *txn, who identity.ID) (released, readdressed []string, err error) {
	if released, readdressed, err = t.Depart(who); err != nil {
		return nil, nil, err
	}
	if _, err = e.dropTx(t, Drop{Holder: string(who)}, seqsOf(released)); err != nil {
		return nil, nil, err
	}
	if len(released) > 0 || len(readdressed) > 0 {
		err = t.emit(Event{Claimable, wakeup.Everyone})
	}
	return released, readdressed, err
}

// reap departs the members whose bridge process has died without a word
// (SIGKILL, a crash), of those whose process the store can see (see
// Store.Processes): their
// claims go back to open and what was addressed to them goes to their
// agent name at once, instead of when a lease runs out. Every view calls
// it first, so a dead holder never shows as holding (Next, whose answer
// is its own claim, reaps only after a look that claimed nothing). It
// writes only when it finds one, and reports whether it departed any; a
// failure is logged and left to the next look or the lease. The pids are judged by the engine's liveness.Watch: one poll for
// all of them, where each used to cost a signal and a read of /proc
// before every claim, in every bridge of the machine.
func (e *Engine) reap(ctx context.Context) (departed bool) {
	procs, err := e.s.Processes(ctx)
	if err != nil {
		return false
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	var dead []identity.ID
	for i, alive := range e.procs.Alive(pids) {
		if !alive {
			dead = append(dead, procs[i].ID)
		}
	}
	if len(dead) == 0 {
		return false
	}
	var released, readdressed []string
	err = e.write(ctx, "depart dead members", func(t *txn) error {
		released, readdressed = nil, nil
		for _, who := range dead {
			// Look again under the lock: it may have departed or joined
			// again meanwhile.
			still, err := t.StillDead(who)
			if err != nil {
				return err
			}
			if !still {
				continue
			}
			rel, re, err := e.departTx(t, who)
			if err != nil {
				return err
			}
			released, readdressed = append(released, rel...), append(readdressed, re...)
		}
		return nil
	})
	if err != nil {
		e.log.Warn("cannot depart members whose process died; their leases will", logkey.Err, err)
		return false
	}
	e.log.Info("members departed: their processes died", keyIdentities, dead, keyReleased, released, keyReaddressed, readdressed)
	return true
}

// markGone sets HolderGone on the claimed records whose holder is not live
// by the store's rule: a view shows a dead holder as such even when reap
// could not depart it. It also fills HeldBackBy (see markHeld): every view
// that marks gone holders shows what holds actions back.
func (e *Engine) markGone(ctx context.Context, recs []actions.Record) {
	e.markHeld(ctx, recs)
	var holders []string
	for _, r := range recs {
		if r.State == actions.Claimed && !slices.Contains(holders, r.Holder) {
			holders = append(holders, r.Holder)
		}
	}
	if len(holders) == 0 {
		return
	}
	live, err := e.s.Alive(ctx, holders)
	if err != nil {
		return
	}
	for i := range recs {
		if recs[i].State == actions.Claimed && !live[recs[i].Holder] {
			recs[i].HolderGone = true
		}
	}
}

// checkLive refuses to as a recipient when it is an identity that is not
// live: nobody could ever claim what is addressed to it. The error names
// the agent's live identities, or suggests its name.
func (e *Engine) checkLive(ctx context.Context, to string) error {
	if !identity.IsID(to) {
		return nil
	}
	members, err := e.s.AgentMembers(ctx, identity.ID(to).Agent())
	if err != nil {
		return err
	}
	var (
		found bool
		self  MemberLife
		alive []string
	)
	for _, m := range members {
		if m.ID == to {
			found, self = true, m
		}
		if m.Live {
			alive = append(alive, m.ID)
		}
	}
	if found && self.Live {
		return nil
	}
	return actions.NotLiveErr(to, found, self.Departed, alive)
}

// SetWaiter implements actions.Source: it records on who's member row
// whether its session's waiter is armed.
func (e *Engine) SetWaiter(ctx context.Context, who identity.ID, armed bool) error {
	if err := e.write(ctx, "set waiter", func(t *txn) error { return t.SetWaiter(who, armed) }); err != nil {
		return fmt.Errorf("set waiter of %s: %w", who, err)
	}
	return nil
}

// Members implements actions.Board: the live identities by the store's
// rule, oldest first, with the actions each holds and whether its waiter
// is armed. A member whose process has died departs first (see reap).
func (e *Engine) Members(ctx context.Context) ([]actions.MemberInfo, error) {
	e.reap(ctx)
	members, err := e.s.Members(ctx)
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	return members, nil
}

// Log keys of the engine's own, besides package logkey's (which other
// work is moving every key into): the ids a departure released and
// re-addressed, and the identities that departed.
const (
	keyReleased    = "released"
	keyReaddressed = "readdressed"
	keyIdentities  = "identities"
)
