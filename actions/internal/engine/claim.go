package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Next implements actions.Source. It waits for the most urgent open action
// who may take (addressed to anyone, to who's agent name, or to who; the
// lowest priority, the oldest first within one: see Want), claims it for
// who in one write transaction and returns it. Before claiming it
// puts back to open every claim whose holder's lease has run out.
//
// It returns within timeout: on timeout the page has no records (a non-nil
// empty slice). A non-positive timeout looks once without waiting (bounded
// by Config.OnceBound). When ctx ends first Next returns ctx's error, and
// when ctx ends just as the claim commits, Next gives the claim back
// before returning ctx's error, so nothing is held by a call whose answer
// nobody received. A claim whose commit's answer has not come by the
// deadline (see Unsure) is not waited for: Next returns without it, and
// it is given back in the background if it committed.
//
// The cursor Next returns marks how far the posting order had reached.
// Next checks after (actions.ErrBadCursor for a cursor this board did not
// make) but always offers the first claimable action, even one posted
// before after: a released or reclaimed action goes back to its place in
// the order and must not be skipped.
//
// who must be an identity. If it has not joined, Next joins it for this
// process, so that its claims are covered by a lease. If it has departed,
// Next returns actions.ErrDeparted.
func (e *Engine) Next(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	cur := e.s.Cursors()
	head, err := cur.ParseSeq(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	once := timeout <= 0
	if once {
		timeout = e.cfg.OnceBound
	}
	c, cancel := e.newCall(ctx, "next", Want{Who: who, Skip: []int64{}}, timeout)
	defer cancel()
	c.head, c.once = head, once
	n, ok, err := c.run()
	switch {
	case err != nil:
		return actions.Page{}, err
	case !ok:
		return actions.Page{Records: []actions.Record{}, Cursor: cur.Seq(c.head)}, nil
	}
	return actions.Page{Records: []actions.Record{n.Record}, Cursor: cur.Seq(max(c.head, n.Record.Seq))}, nil
}

// Notice implements actions.Source. Each look departs members whose
// process died, then looks for an outcome who should hear, then for an
// action who may take that is not in skip, which it claims as Next does
// (leases, reclaiming, and giving the claim back when ctx ends as it
// commits). Between looks it sleeps until a post, release or end in any
// process, a lease running out, or the safety poll.
func (e *Engine) Notice(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (actions.Notice, bool, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Notice{}, false, fmt.Errorf("notice: %w", err)
	}
	seqs := make([]int64, 0, len(skip))
	for _, id := range skip {
		if seq, ok := position.ParseActionID(id); ok {
			seqs = append(seqs, seq)
		}
	}
	c, cancel := e.newCall(ctx, "notice", Want{Who: who, Skip: seqs}, max(timeout, time.Millisecond))
	defer cancel()
	c.outcomes = true
	return c.run()
}

// A call is one call of Next or Notice, which runs in named steps: hot,
// then look and rest until a claim (or an outcome), an error or the
// deadline; its answer comes from answer, claimed or fail.
type call struct {
	e        *Engine
	op       string          // "next" or "notice", for errors
	ctx      context.Context // the caller's
	wctx     context.Context // ctx bounded by the call's timeout
	w        Want
	head     int64 // how far the posting order had reached, for Next's cursor
	once     bool  // look once, without waiting
	outcomes bool  // Notice: outcomes first, and an end wakes the call
	// slept says that the call has slept: what it claims came while it
	// waited, one action at a time, not from a queue it drains (see
	// call.hot).
	slept bool
}

func (e *Engine) newCall(ctx context.Context, op string, w Want, timeout time.Duration) (*call, context.CancelFunc) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	return &call{e: e, op: op, ctx: ctx, wctx: wctx, w: w}, cancel
}

// run is the call: ok is false on timeout.
func (c *call) run() (actions.Notice, bool, error) {
	if err := c.e.s.Closed(); err != nil {
		return actions.Notice{}, false, err
	}
	if r, err := c.hot(); err != nil || r.ok {
		return c.answer(r, err)
	}
	for {
		wake, ended := c.channels() // before looking, so that no wake-up is missed
		l, r, err := c.look()
		if err != nil || r.ok {
			return c.answer(r, err)
		}
		if !c.rest(l, wake, ended) {
			return actions.Notice{}, false, nil
		}
		c.slept = true
		if c.wctx.Err() != nil || c.e.done() {
			return c.fail(c.wctx.Err())
		}
	}
}

// channels returns what wakes the call: a change that may make work
// claimable for who's agent, and for Notice the end of an action its agent
// posted.
func (c *call) channels() (wake, ended <-chan struct{}) {
	agent := c.w.Who.Agent()
	wake = c.e.cfg.Hub.Claimable(agent)
	if c.outcomes {
		ended = c.e.cfg.Hub.Ended(agent)
	}
	return wake, ended
}

// hot claims at once, without looking first, for an identity that claimed
// through this board a moment ago what its look found waiting: it is
// likely draining a queue. Idle waiters look first, so that a post waking
// them all does not send them all to the write lock; and a claim that came
// after a sleep (a post that woke the call) makes nobody hot, since the
// next call would most likely find nothing and have held the write lock
// for it, just as the next post wants it. For an identity not hot (or a
// store without Config.HotClaims, or Notice) it claims nothing.
func (c *call) hot() (claimResult, error) {
	if c.outcomes {
		return claimResult{}, nil
	}
	l, ok := c.e.hotLook(c.w.Who)
	if !ok {
		return claimResult{}, nil
	}
	r, err := c.e.claim(c.wctx, c.w, l)
	switch {
	case err == nil && r.ok:
		c.e.markHot(c.w.Who, r.lease, l.Expiry, false)
	case err == nil:
		c.e.forgetHot(c.w.Who) // the queue is drained
	}
	return r, err
}

// look looks for work and, when the look found an action who may take or
// a lease run out, claims. When it finds nothing, l says when a lease runs
// out: when to look again.
//
// Next claims before it reaps: the claim that a post woke the call for
// does not wait for the read of this machine's members. A look that claims
// nothing reaps, and looks again if a dead member departed, so that what
// it held is claimed in the same call. Notice reaps first, then looks for
// an outcome, then for work.
func (c *call) look() (l Look, r claimResult, err error) {
	e := c.e
	if c.outcomes {
		e.reap(c.wctx)
		r.rec, r.ok, err = e.takeOutcome(c.wctx, c.w.Who)
		if err != nil || r.ok {
			r.outcome = true
			return l, r, err
		}
		return c.lookWork()
	}
	if l, r, err = c.lookWork(); err != nil || r.ok || !e.reap(c.wctx) {
		return l, r, err
	}
	return c.lookWork()
}

// lookWork is look's look for work, and its claim.
func (c *call) lookWork() (l Look, r claimResult, err error) {
	e := c.e
	if cl, ok := e.s.(Claimer); ok {
		return c.claimOnce(cl)
	}
	if l, err = e.s.Look(c.wctx, c.w); err != nil {
		return l, r, err
	}
	c.head = max(c.head, l.Head)
	switch {
	case l.Departed:
		return l, r, actions.ErrDeparted
	case !l.Claimable && !l.Reclaim:
		return l, r, nil
	}
	// When someone else is faster, the claim's transaction has just
	// looked: its expiry is when to look again, and a change since has
	// already closed the caller's wake channel.
	if r, err = e.claim(c.wctx, c.w, l); err == nil && r.ok && !c.slept {
		e.markHot(c.w.Who, r.lease, l.Expiry, true)
	}
	l.Expiry = r.expiry
	return l, r, err
}

// claimOnce is look for a Claimer: one statement looks and claims. When
// it leaves the claim to the engine (Claimed.Slow: a reclaim first, or
// paths to reserve), the engine's claim transaction follows, with what
// the statement saw as its look.
func (c *call) claimOnce(cl Claimer) (Look, claimResult, error) {
	e := c.e
	got, err := cl.Claim(c.wctx, c.w)
	if u := (*ClaimUnsure)(nil); errors.As(err, &u) {
		// The caller gets nothing: what the claim did is settled in the
		// background (given back, if it claimed).
		e.settleClaim(c.w.Who, u)
		return Look{}, claimResult{}, nil
	}
	if err != nil {
		return Look{}, claimResult{}, err
	}
	l := got.Look
	c.head = max(c.head, l.Head)
	if l.Departed {
		return l, claimResult{}, actions.ErrDeparted
	}
	r := claimResult{rec: got.Rec, ok: got.OK, joined: got.Joined, lease: l.Lease, expiry: l.Expiry}
	e.announce(c.w.Who, r)
	if r.ok {
		e.cfg.Hub.Fire(Event{Changed, wakeup.Everyone})
		e.s.Tell(Event{Changed, wakeup.Everyone})
	}
	if !got.Slow {
		return l, r, nil
	}
	if r, err = e.claim(c.wctx, c.w, l); err == nil && r.ok && !c.slept {
		e.markHot(c.w.Who, r.lease, l.Expiry, true)
	}
	l.Expiry = r.expiry
	return l, r, err
}

// settleClaim finds out, in the background, whether a Claimer's claim for
// who whose answer was lost claimed (see settleUnsure).
func (e *Engine) settleClaim(who identity.ID, u *ClaimUnsure) {
	var got Claimed
	resolve := func(ctx context.Context) (bool, error) {
		var err error
		got, err = u.Resolve(ctx)
		return got.OK || got.Joined, err
	}
	e.settleWrite(&Unsure{Err: u.Err, Resolve: resolve}, "a claim", "it is held until its holder departs or its lease runs out", "", who,
		func(ctx context.Context) {
			e.announce(who, claimResult{rec: got.Rec, ok: got.OK, joined: got.Joined})
			if got.OK {
				e.s.Holding(who, 1)
				_ = e.release(ctx, who, got.Rec, "its commit's answer came after the call had returned")
			}
		})
}

// rest sleeps after a look that claimed nothing, until wake or ended
// closes, the lease l saw ending runs out, the safety poll or the deadline
// passes, or the call or the board ends. It returns false, without
// sleeping, when the call may not wait (once, or past its deadline).
func (c *call) rest(l Look, wake, ended <-chan struct{}) bool {
	d := time.Until(deadlineOf(c.wctx))
	if c.once || d <= 0 {
		return false
	}
	if c.e.cfg.BeforeSleep != nil {
		c.e.cfg.BeforeSleep()
	}
	if warm := c.e.cfg.Warm; warm != nil {
		c.e.warmOnce.Do(func() { c.e.cfg.Life.Go(warm) })
	}
	c.e.sleep(c.wctx, min(d, c.e.cfg.SafetyPoll), l, wake, ended)
	return true
}

// answer is the call's answer to a step that claimed, told or failed.
func (c *call) answer(r claimResult, err error) (actions.Notice, bool, error) {
	switch {
	case errors.Is(err, actions.ErrDeparted):
		return actions.Notice{}, false, fmt.Errorf("%s for %s: %w; join it again or use a new identity", c.op, c.w.Who, actions.ErrDeparted)
	case err != nil:
		return c.fail(err)
	case r.outcome:
		return actions.Notice{Kind: actions.NoticeOutcome, Record: r.rec}, true, nil
	}
	return c.claimed(r.rec)
}

// claimed answers with a claim, or gives it back if nobody is left to
// receive it.
func (c *call) claimed(rec actions.Record) (actions.Notice, bool, error) {
	c.e.s.Holding(c.w.Who, 1)
	if c.e.cfg.AfterClaim != nil {
		c.e.cfg.AfterClaim(rec)
	}
	if c.ctx.Err() != nil {
		return actions.Notice{}, false, c.e.giveBack(c.ctx, c.w.Who, rec)
	}
	return actions.Notice{Kind: actions.NoticeWork, Record: rec}, true, nil
}

// fail maps an error of a step to the call's answer: the caller's context
// ended, the board closed, the deadline passed (nothing found), or err.
func (c *call) fail(err error) (actions.Notice, bool, error) {
	switch {
	case c.ctx.Err() != nil:
		return actions.Notice{}, false, c.ctx.Err()
	case c.e.done():
		return actions.Notice{}, false, c.e.s.Closed()
	case c.wctx.Err() != nil:
		return actions.Notice{}, false, nil
	}
	return actions.Notice{}, false, fmt.Errorf("%s for %s: %w", c.op, c.w.Who, err)
}

// sleep waits until wake or also closes (either may be nil), d (a real
// duration) passes, the lease l saw ending runs out (on the board's
// clock), ctx ends or the board closes.
func (e *Engine) sleep(ctx context.Context, d time.Duration, l Look, wake, also <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	var leaseEnd <-chan time.Time
	if !l.Expiry.IsZero() {
		// The lease end is on the store's time: count from the look's own
		// now, less what the clock says has passed since.
		clock := e.cfg.Clock
		lt := clock.NewTimer(l.Expiry.Sub(l.Now) - clock.Now().Sub(l.At) + time.Millisecond)
		defer lt.Stop()
		leaseEnd = lt.C()
	}
	select {
	case <-wake:
	case <-also:
	case <-leaseEnd:
	case <-t.C:
	case <-ctx.Done():
	case <-e.cfg.Life.Context().Done():
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// A claimResult is what one claim attempt (or, for Notice, one outcome
// told) did.
type claimResult struct {
	rec     actions.Record
	ok      bool // rec was claimed for who (or, with outcome, told)
	outcome bool // rec is an outcome Notice told
	// lease is who's lease end as far as the attempt knows; expiry, when
	// nothing was claimed, the earliest lease end among others' claims
	// (zero when none is known): when to look again.
	lease, expiry time.Time
	// Said after the commit: who joined by this claim, the claims
	// reclaimed, and the holders that departed because their lease ran
	// out.
	joined    bool
	reclaimed []string
	dead      []identity.ID
}

// claim reclaims expired claims and claims the first action w may take,
// in one write transaction, and says so once it has committed (logs, the
// new member's renewal). l is the caller's latest look. A claim whose
// commit's answer did not come by ctx's deadline claimed nothing, as far
// as the caller knows: settleUnsure gives it back if it committed.
func (e *Engine) claim(ctx context.Context, w Want, l Look) (claimResult, error) {
	var r claimResult
	err := e.write(ctx, "claim", func(t *txn) error {
		r = claimResult{}
		return e.claimTx(t, w, l, &r)
	})
	if err != nil {
		if u := (*Unsure)(nil); errors.As(err, &u) {
			// The caller gets nothing: what the claim did is settled in
			// the background (given back, if it committed).
			e.settleUnsure(w.Who, r, u)
			return claimResult{}, nil
		}
		return claimResult{}, err
	}
	e.announce(w.Who, r)
	return r, nil
}

// claimTx is the claim's transaction: the claimant's row (joined, departed,
// its lease), the reclaim when a lease ran out, then the take.
func (e *Engine) claimTx(t *txn, w Want, l Look, r *claimResult) error {
	st, err := t.Claimant(w, l)
	if err != nil {
		return err
	}
	r.joined, r.lease, r.expiry = st.Joined, st.Lease, st.Expiry
	switch {
	case st.Departed:
		return actions.ErrDeparted
	case st.Idle:
		return nil
	case st.Reclaim:
		if r.reclaimed, r.dead, err = e.reclaimTx(t, w.Who); err != nil {
			return err
		}
	}
	if r.rec, r.ok, err = t.Take(w); err != nil || !r.ok {
		return err
	}
	if r.ok, err = e.claimPathsTx(t, r.rec); err != nil || !r.ok {
		return err
	}
	return t.emit(Event{Changed, wakeup.Everyone})
}

// reclaimTx departs, inside t, the holders other than who whose lease ran
// out (a holder renews while it lives, so it has died: see departTx), and
// puts back to open what other holders that are not live members hold. It
// returns the ids that went back and the holders that departed.
func (e *Engine) reclaimTx(t *txn, who identity.ID) (back []string, dead []identity.ID, err error) {
	dead, ok, err := t.Expired(who)
	if err != nil || !ok {
		return nil, nil, err
	}
	for _, d := range dead {
		released, readdressed, err := e.departTx(t, d)
		if err != nil {
			return nil, nil, err
		}
		back = append(append(back, released...), readdressed...)
	}
	orphans, err := t.ReleaseOrphans(who)
	if err != nil {
		return nil, nil, err
	}
	if err := e.servedTx(t, seqsOf(orphans)); err != nil {
		return nil, nil, err
	}
	if len(orphans) > 0 {
		if err := t.emit(Event{Claimable, wakeup.Everyone}); err != nil {
			return nil, nil, err
		}
	}
	return append(back, orphans...), dead, nil
}

// announce says what a committed claim attempt did: logs, and the renewal
// of a member it joined.
func (e *Engine) announce(who identity.ID, r claimResult) {
	if len(r.reclaimed) > 0 {
		e.log.Info("claims reclaimed: their holders' leases ran out", logkey.ActionIDs, r.reclaimed, logkey.Holder, r.dead)
	}
	if r.joined {
		e.log.Info("member joined by its first claim", logkey.Identity, string(who))
		e.s.Joined(actions.Member{ID: who, PID: os.Getpid()})
	}
	if r.ok {
		e.log.Info("action claimed", logkey.ActionID, r.rec.ID, logkey.Identity, string(who))
	}
}

// giveBack releases a claim whose caller has gone away and returns the
// caller's error (joined with the release's, should that fail: then the
// claim stays held until who departs or its lease runs out). It waits for
// the release at most giveBackWait, so that a call returns soon whatever
// the storage does; a release still running then goes on in the
// background, until it ends or the board closes.
func (e *Engine) giveBack(ctx context.Context, who identity.ID, rec actions.Record) error {
	done := make(chan error, 1)
	if !e.cfg.Life.Go(func() { done <- e.release(context.WithoutCancel(ctx), who, rec, "the caller went away") }) {
		return errors.Join(ctx.Err(), e.s.Closed())
	}
	t := time.NewTimer(giveBackWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("give back %s: %w", rec.ID, err))
		}
	case <-t.C:
		e.log.Warn("giving back a claim nobody received takes long; it goes on in the background", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	}
	return ctx.Err()
}

// giveBackWait bounds how long a call waits for the release of a claim it
// gives back.
const giveBackWait = time.Second

// release gives back who's claim rec, which nobody received (why says
// why), and logs what came of it.
func (e *Engine) release(ctx context.Context, who identity.ID, rec actions.Record, why string) error {
	_, err := e.Release(ctx, who, rec.ID)
	if err != nil {
		e.log.Error("cannot give back a claim nobody received", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Err, err)
		return err
	}
	e.log.Info("claim given back: "+why, logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return nil
}

// settleUnsure finds out, in the background, whether a claim attempt r
// for who whose commit went unanswered by the call's deadline committed
// (see settleWrite); the call has returned without it. If it did, it says
// what the attempt did (see announce: a member it joined is renewed from
// now on) and gives back the action it claimed, which nobody received.
func (e *Engine) settleUnsure(who identity.ID, r claimResult, u *Unsure) {
	e.settleWrite(u, "a claim", "it is held until its holder departs or its lease runs out", r.rec.ID, who, func(ctx context.Context) {
		e.announce(who, r)
		if r.ok {
			e.s.Holding(who, 1)
			_ = e.release(ctx, who, r.rec, "its commit's answer came after the call had returned")
		}
	})
}

// settleWrite finds out, in the background, whether the write whose commit
// went unanswered (u; what it was, its action id and identity, for the
// logs) committed, and if so runs then; if it cannot tell, it logs so,
// and what follows (otherwise). It runs until it knows or the board
// closes: a bridge departs its identities as it closes, which gives their
// claims back.
func (e *Engine) settleWrite(u *Unsure, what, otherwise, id string, who identity.ID, then func(ctx context.Context)) {
	e.log.Warn("the commit of "+what+" went unanswered by the call's deadline; finding out in the background whether it committed",
		logkey.ActionID, id, logkey.Identity, string(who), logkey.Err, u.Err)
	e.cfg.Life.Go(func() {
		ctx := e.cfg.Life.Context()
		committed, err := u.Resolve(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error("cannot tell whether "+what+" nobody received committed; if it did, "+otherwise,
				logkey.ActionID, id, logkey.Identity, string(who), logkey.Err, err)
		case err != nil:
		case !committed:
			e.log.Info(what+" whose commit went unanswered did not commit", logkey.ActionID, id, logkey.Identity, string(who))
		default:
			then(ctx)
		}
	})
}

// hotFor is how long after a claim that followed a look an identity counts
// as draining a queue, and claims without looking first (see call.hot).
// Its claims in that time reuse what the look found, so it looks again at
// least this often. It is at most half a lease: a claimant's lease has at
// least Lease-Renew (at least half a lease, since Settings.Filled refuses
// a longer Renew) to run when it claims, so no claim made after the look
// can run out before the identity looks again, and expired claims still go
// back before any claim.
func (e *Engine) hotFor() time.Duration { return min(time.Second, e.cfg.Lease/2) }

// hot is what Next remembers of an identity's last look.
type hot struct {
	at     time.Time // when it looked
	lease  time.Time // its own lease end
	expiry time.Time // the earliest lease end among others' claims, zero for none
}

// markHot records that who has just claimed; looked says whether a fresh
// look (rather than a remembered one) led to the claim.
func (e *Engine) markHot(who identity.ID, lease, expiry time.Time, looked bool) {
	if !e.cfg.HotClaims {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.hot[who]
	if looked {
		h.at, h.expiry = e.cfg.Clock.Now(), expiry
	}
	h.lease = lease
	e.hot[who] = h
}

// hotLook returns what who's last look found, as a look, if who claimed
// after looking within hotFor.
func (e *Engine) hotLook(who identity.ID) (Look, bool) {
	if !e.cfg.HotClaims {
		return Look{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hot[who]
	if !ok {
		return Look{}, false
	}
	now := e.cfg.Clock.Now()
	if now.Sub(h.at) > e.hotFor() {
		delete(e.hot, who)
		return Look{}, false
	}
	return Look{Member: true, Lease: h.lease, Expiry: h.expiry, Now: now, At: now}, true
}

// forgetHot forgets who's last look (who departs).
func (e *Engine) forgetHot(who identity.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.hot, who)
}
