package boardtest

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
)

// deadPID returns the pid of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func testFailAndCancel(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := Mint(t, "lead")
	worker := Mint(t, "worker")
	join(t, b, poster)
	join(t, b, worker)

	a := post(t, b, poster, "", "will fail")
	require.Equal(t, a.ID, next(t, b, worker).ID)
	_, err := b.Fail(ctx, worker, a.ID, "  ")
	require.ErrorIs(t, err, actions.ErrEmptyReason)
	_, err = b.Fail(ctx, poster, a.ID, "not mine")
	require.ErrorIs(t, err, actions.ErrNotHeld)
	failed, err := b.Fail(ctx, worker, a.ID, "the disk is full")
	require.NoError(t, err)
	require.Equal(t, actions.Failed, failed.State)
	require.Equal(t, "the disk is full", failed.Reason)
	require.Equal(t, string(worker), failed.EndedBy)
	require.Equal(t, string(worker), failed.Holder)
	require.NotNil(t, failed.EndedAt)
	_, err = b.Finish(ctx, worker, a.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "the disk is full")

	// A claimed action cancelled by its poster's agent (a later identity
	// of it): the holder's finish is refused with the reason.
	c := post(t, b, poster, "", "will be cancelled")
	require.Equal(t, c.ID, next(t, b, worker).ID)
	later := Mint(t, "lead")
	cancelled, err := b.Cancel(ctx, actions.Agent(later), c.ID, "no longer needed")
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, cancelled.State)
	require.Equal(t, string(later), cancelled.EndedBy)
	require.Equal(t, "no longer needed", cancelled.Reason)
	_, err = b.Finish(ctx, worker, c.ID, "done anyway")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "cancelled by "+string(later))
	require.ErrorContains(t, err, "no longer needed")
	_, err = b.Cancel(ctx, actions.Agent(poster), c.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)

	// An open action cancelled by a person has no holder.
	o := post(t, b, poster, "", "open one")
	cancelled, err = b.Cancel(ctx, "user:alice", o.ID, "")
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, cancelled.State)
	require.Empty(t, cancelled.Holder)
	nothingFor(t, b, worker)
}

func testCancelRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := Mint(t, "lead")
	stranger := Mint(t, "stranger")
	a := post(t, b, poster, "", "job")
	_, err := b.Cancel(ctx, actions.Agent(stranger), a.ID, "")
	require.ErrorIs(t, err, actions.ErrNotPoster)
	require.ErrorContains(t, err, string(poster))
	_, err = b.Cancel(ctx, actions.Agent(poster), "a-99", "")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	_, err = b.Cancel(ctx, "nobody", a.ID, "")
	require.ErrorIs(t, err, actions.ErrBadPoster)
	got, err := b.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State)
}

func testReaddress(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := Mint(t, "lead")
	w := Mint(t, "worker")
	join(t, b, w)
	a := post(t, b, poster, "nobody-yet", "job")
	nothingFor(t, b, w)

	_, err := b.Readdress(ctx, actions.Agent(Mint(t, "stranger")), a.ID, "worker")
	require.ErrorIs(t, err, actions.ErrNotPoster)
	_, err = b.Readdress(ctx, actions.Agent(poster), a.ID, string(Mint(t, "worker")))
	require.ErrorIs(t, err, actions.ErrNotLive, "an identity that never joined")
	_, err = b.Readdress(ctx, actions.Agent(poster), a.ID, "bad name!")
	require.ErrorIs(t, err, actions.ErrBadRecipient)

	r, err := b.Readdress(ctx, "user:alice", a.ID, string(w))
	require.NoError(t, err)
	require.Equal(t, string(w), r.To)
	require.Equal(t, a.ID, next(t, b, w).ID)

	_, err = b.Readdress(ctx, actions.Agent(poster), a.ID, "")
	require.ErrorIs(t, err, actions.ErrNotOpen)
	require.ErrorContains(t, err, string(w))
	_, err = b.Finish(ctx, w, a.ID, "")
	require.NoError(t, err)
	_, err = b.Readdress(ctx, actions.Agent(poster), a.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)
	_, err = b.Readdress(ctx, actions.Agent(poster), "a-99", "")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
}

func testPostToIdentityNotLive(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	live := Mint(t, "worker")
	join(t, b, live)
	gone := Mint(t, "worker")
	join(t, b, gone)
	require.NoError(t, b.Depart(ctx, gone))

	_, err := b.Post(ctx, "user:alice", actions.Draft{To: string(gone), Title: "for the departed"})
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, "departed")
	require.ErrorContains(t, err, string(live), "the error names the agent's live identities")

	never := Mint(t, "nobody")
	_, err = b.Post(ctx, "user:alice", actions.Draft{To: string(never), Title: "for a stranger"})
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, `post to the agent name "nobody"`)

	dead := Mint(t, "worker")
	require.NoError(t, b.Join(ctx, actions.Member{ID: dead, PID: deadPID(t)}))
	_, err = b.Post(ctx, "user:alice", actions.Draft{To: string(dead), Title: "for the dead"})
	require.ErrorIs(t, err, actions.ErrNotLive)

	r, err := b.Post(ctx, "user:alice", actions.Draft{To: string(live), Title: "for the live"})
	require.NoError(t, err)
	require.Equal(t, string(live), r.To)
}

func testAwaitWakesOnEnd(t *testing.T, open Opener) {
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	b := open(t, "", Options{SafetyPoll: testtime.Bound(30 * time.Second)})
	other := open(t, b.Location(), Options{})
	ctx := t.Context()
	poster := Mint(t, "lead")
	w := Mint(t, "worker")
	join(t, b, poster)
	a := post(t, b, poster, "", "one")
	c := post(t, b, poster, "", "two")

	type result struct {
		recs []actions.Record
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		recs, err := b.Await(ctx, actions.Agent(poster), []string{a.ID, c.ID}, testtime.Bound(20*time.Second))
		ch <- result{recs, err}
	}()
	require.Equal(t, a.ID, next(t, other, w).ID)
	start := time.Now()
	_, err := other.Finish(ctx, w, a.ID, "the answer")
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.recs, 1)
	require.Equal(t, a.ID, r.recs[0].ID)
	require.Equal(t, "the answer", r.recs[0].Result)
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "woken by the end, not the safety poll")

	// The poster has heard: no outcome notice for it.
	_, ok, err := b.Notice(ctx, poster, []string{c.ID}, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "an awaited outcome is told")
}

func testAwaitUnknownAndTimeout(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	a := post(t, b, "user:alice", "", "job")
	_, err := b.Await(ctx, "user:alice", []string{a.ID, "a-99"}, time.Second)
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	require.ErrorContains(t, err, "a-99")
	start := time.Now()
	recs, err := b.Await(ctx, "user:alice", []string{a.ID}, 100*time.Millisecond)
	require.NoError(t, err)
	require.NotNil(t, recs)
	require.Empty(t, recs)
	require.Less(t, time.Since(start), testtime.Bound(3*time.Second))
}

func testNoticeOutcomeThenWork(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := Mint(t, "lead")
	w := Mint(t, "worker")
	join(t, b, poster)
	join(t, b, w)
	a := post(t, b, poster, "worker", "job")
	require.Equal(t, a.ID, next(t, b, w).ID)
	_, err := b.Finish(ctx, w, a.ID, "result")
	require.NoError(t, err)
	work := post(t, b, "user:alice", "", "for anyone")

	// Outcomes come first.
	n, ok, err := b.Notice(ctx, poster, nil, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, a.ID, n.Record.ID)
	require.Equal(t, actions.Done, n.Record.State)

	// Then work, claimed for who.
	n, ok, err = b.Notice(ctx, poster, nil, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, actions.NoticeWork, n.Kind)
	require.Equal(t, work.ID, n.Record.ID)
	require.Equal(t, actions.Claimed, n.Record.State)
	require.Equal(t, string(poster), n.Record.Holder)

	// Nothing more: each outcome is told once.
	_, ok, err = b.Notice(ctx, poster, nil, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)

	// A departed poster's outcomes go to the next identity of its agent.
	b2 := post(t, b, poster, "", "second job")
	require.Equal(t, b2.ID, next(t, b, w).ID)
	require.NoError(t, b.Depart(ctx, poster))
	_, err = b.Fail(ctx, w, b2.ID, "cannot")
	require.NoError(t, err)
	successor := Mint(t, "lead")
	join(t, b, successor)
	n, ok, err = b.Notice(ctx, successor, nil, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, b2.ID, n.Record.ID)
	require.Equal(t, actions.Failed, n.Record.State)

	// The wait is a bound here: a call whose time runs out before its first
	// look at the board (a busy machine) returns no notice and no error.
	_, _, err = b.Notice(ctx, poster, nil, testtime.Bound(50*time.Millisecond))
	require.ErrorIs(t, err, actions.ErrDeparted)
}

func testNoticeSkipsAndOnlyOneHears(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	other := open(t, b.Location(), Options{})
	ctx := t.Context()
	w1, w2 := Mint(t, "worker"), Mint(t, "worker")
	join(t, b, w1)
	join(t, other, w2)
	a := post(t, b, "user:alice", "", "job")

	_, ok, err := b.Notice(ctx, w1, []string{a.ID}, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "a skipped action is not news")

	type result struct {
		n   actions.Notice
		ok  bool
		err error
	}
	// Two idle sessions look at once: only one hears of (and holds) it.
	ch := make(chan result, 2)
	go func() {
		n, ok, err := b.Notice(ctx, w1, nil, time.Second)
		ch <- result{n, ok, err}
	}()
	go func() {
		n, ok, err := other.Notice(ctx, w2, nil, time.Second)
		ch <- result{n, ok, err}
	}()
	heard := 0
	for range 2 {
		r := <-ch
		require.NoError(t, r.err)
		if r.ok {
			heard++
			require.Equal(t, a.ID, r.n.Record.ID)
		}
	}
	require.Equal(t, 1, heard, "exactly one idle session hears of an action for anyone")
}
