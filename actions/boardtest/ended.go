package boardtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// Outcomes, notices and re-addressing, moved here from actions/board.

// joinLive mints an identity of agent name and joins it as this process.
func joinLive(t *testing.T, b actions.Board, name string) identity.ID {
	t.Helper()
	who := Mint(t, name)
	join(t, b, who)
	return who
}

func testEndingTransitions(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := joinLive(t, b, "lead")
	sibling := joinLive(t, b, "lead") // another identity of the poster's agent
	worker := joinLive(t, b, "worker")
	stranger := joinLive(t, b, "stranger")

	claimed := func(title string) actions.Record {
		t.Helper()
		r := post(t, b, poster, "worker", title)
		require.Equal(t, r.ID, next(t, b, worker).ID)
		return r
	}

	// done, with a result; nothing changes it afterwards.
	r := claimed("finish me")
	done, err := b.Finish(ctx, worker, r.ID, "42")
	require.NoError(t, err)
	require.Equal(t, actions.Done, done.State)
	require.Equal(t, "42", done.Result)
	require.Equal(t, string(worker), done.EndedBy)
	require.NotNil(t, done.EndedAt)

	// failed, with a reason.
	r = claimed("fail me")
	_, err = b.Fail(ctx, worker, r.ID, "  ")
	require.ErrorIs(t, err, actions.ErrEmptyReason)
	failed, err := b.Fail(ctx, worker, r.ID, "the disk is full")
	require.NoError(t, err)
	require.Equal(t, actions.Failed, failed.State)
	require.Equal(t, "the disk is full", failed.Reason)
	require.Equal(t, string(worker), failed.Holder)

	// cancelled while claimed: the holder's finish is refused with why.
	r = claimed("cancel me while held")
	_, err = b.Cancel(ctx, actions.Agent(stranger), r.ID, "")
	require.ErrorIs(t, err, actions.ErrNotPoster, "another agent may not cancel it")
	cancelled, err := b.Cancel(ctx, actions.Agent(sibling), r.ID, "not needed any more")
	require.NoError(t, err, "any identity of the poster's agent may cancel")
	require.Equal(t, actions.Cancelled, cancelled.State)
	require.Equal(t, string(sibling), cancelled.EndedBy)
	_, err = b.Finish(ctx, worker, r.ID, "done anyway")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "cancelled by "+string(sibling)+": not needed any more")

	// cancelled while open, by a person.
	openOne := post(t, b, poster, "", "cancel me while open")
	c, err := b.Cancel(ctx, "user:alice", openOne.ID, "")
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, c.State)
	require.Empty(t, c.Holder)

	// Every refused transition on an ended action names how it ended.
	for _, tc := range []struct {
		name string
		op   func(id string) (actions.Record, error)
		rec  actions.Record
		want string
	}{
		{"finish done", func(id string) (actions.Record, error) { return b.Finish(ctx, worker, id, "") }, done, "finished by"},
		{"fail done", func(id string) (actions.Record, error) { return b.Fail(ctx, worker, id, "x") }, done, "finished by"},
		{"release failed", func(id string) (actions.Record, error) { return b.Release(ctx, worker, id) }, failed, "failed (" + string(worker) + ": the disk is full)"},
		{"cancel failed", func(id string) (actions.Record, error) { return b.Cancel(ctx, actions.Agent(poster), id, "") }, failed, "failed"},
		{"cancel cancelled", func(id string) (actions.Record, error) { return b.Cancel(ctx, "user:alice", id, "") }, c, "cancelled by user:alice"},
		{"readdress done", func(id string) (actions.Record, error) { return b.Readdress(ctx, "user:alice", id, "") }, done, "finished by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.op(tc.rec.ID)
			require.ErrorIs(t, err, actions.ErrEnded)
			require.ErrorContains(t, err, tc.want)
			got, gerr := b.Get(ctx, tc.rec.ID)
			require.NoError(t, gerr)
			require.Equal(t, tc.rec.State, got.State, "a terminal action never changes")
			require.Equal(t, tc.rec.Result, got.Result)
			require.Equal(t, tc.rec.Reason, got.Reason)
		})
	}

	// Re-addressing: open only, poster's agent or a person, live recipients.
	held := claimed("held")
	_, err = b.Readdress(ctx, "user:alice", held.ID, "")
	require.ErrorIs(t, err, actions.ErrNotOpen)
	o := post(t, b, poster, "nobody-yet", "re-address me")
	_, err = b.Readdress(ctx, actions.Agent(stranger), o.ID, "")
	require.ErrorIs(t, err, actions.ErrNotPoster)
	_, err = b.Readdress(ctx, actions.Agent(poster), o.ID, string(Mint(t, "worker")))
	require.ErrorIs(t, err, actions.ErrNotLive)
	re, err := b.Readdress(ctx, actions.Agent(poster), o.ID, string(worker))
	require.NoError(t, err)
	require.Equal(t, string(worker), re.To)
	require.Equal(t, o.ID, next(t, b, worker).ID)
	_, err = b.Cancel(ctx, "user:alice", "a-999", "")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
}

func testPostToIdentityThatIsNotLive(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	gone := joinLive(t, b, "resumer")
	require.NoError(t, b.Depart(ctx, gone))
	_, err := b.Post(ctx, "user:alice", actions.Draft{To: string(gone), Title: "void"})
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, "has departed")
	require.ErrorContains(t, err, `post to the agent name "resumer"`)

	live := joinLive(t, b, "resumer")
	_, err = b.Post(ctx, "user:alice", actions.Draft{To: string(gone), Title: "void"})
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, "live identities of agent \"resumer\": "+string(live))

	_, err = b.Post(ctx, "user:alice", actions.Draft{To: string(Mint(t, "resumer")), Title: "void"})
	require.ErrorContains(t, err, "never joined")
	r, err := b.Post(ctx, "user:alice", actions.Draft{To: string(live), Title: "fine"})
	require.NoError(t, err)
	require.Equal(t, string(live), r.To)
}

func testNoticeOutcomes(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	poster := joinLive(t, b, "lead")
	worker := joinLive(t, b, "worker")

	r := post(t, b, poster, "worker", "job")
	next(t, b, worker)
	_, err := b.Finish(ctx, worker, r.ID, "all good")
	require.NoError(t, err)

	n, ok, err := b.Notice(ctx, poster, nil, time.Second)
	require.NoError(t, err)
	require.True(t, ok, "%+v", n)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, r.ID, n.Record.ID)
	require.Equal(t, "all good", n.Record.Result)
	_, ok, err = b.Notice(ctx, poster, nil, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "an outcome is told once")

	// After the poster departs (/clear), its agent's next identity hears.
	r2 := post(t, b, poster, "worker", "job 2")
	require.NoError(t, b.Depart(ctx, poster))
	successor := joinLive(t, b, "lead")
	next(t, b, worker)
	_, err = b.Fail(ctx, worker, r2.ID, "cannot")
	require.NoError(t, err)
	_, ok, err = b.Notice(ctx, worker, nil, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "another agent does not hear it")
	n, ok, err = b.Notice(ctx, successor, nil, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r2.ID, n.Record.ID)
	require.Equal(t, actions.Failed, n.Record.State)

	// A poster that cancels its own action has heard of it already; a
	// person's posts are never told to agents.
	r3 := post(t, b, successor, "", "job 3")
	_, err = b.Cancel(ctx, actions.Agent(successor), r3.ID, "")
	require.NoError(t, err)
	r4 := post(t, b, "user:alice", "worker", "job 4")
	next(t, b, worker)
	_, err = b.Finish(ctx, worker, r4.ID, "")
	require.NoError(t, err)
	for _, who := range []identity.ID{successor, worker} {
		_, ok, err = b.Notice(ctx, who, nil, 50*time.Millisecond)
		require.NoError(t, err)
		require.False(t, ok, "%s has nothing to hear", who)
	}
}

// Notice claims before it returns, so of several idle identities only one
// hears of an action for anyone; skip keeps an identity from hearing of
// the same action twice.
func testNoticeClaimsForOneWaiter(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	const waiters = 4
	ids := make([]identity.ID, waiters)
	for i := range ids {
		ids[i] = joinLive(t, b, "idle")
	}
	type got struct {
		who identity.ID
		n   actions.Notice
		ok  bool
		err error
	}
	ch := make(chan got, waiters)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, who := range ids {
		go func() {
			n, ok, err := b.Notice(wctx, who, nil, testtime.Bound(10*time.Second))
			ch <- got{who, n, ok, err}
		}()
	}
	r := post(t, b, "user:alice", "", "only one of you")
	first := <-ch
	require.NoError(t, first.err)
	require.True(t, first.ok)
	require.Equal(t, actions.NoticeWork, first.n.Kind)
	require.Equal(t, r.ID, first.n.Record.ID)
	require.Equal(t, actions.Claimed, first.n.Record.State)
	require.Equal(t, string(first.who), first.n.Record.Holder)
	cancel()
	for range waiters - 1 {
		g := <-ch
		require.False(t, g.ok, "%s heard of an action another waiter claimed", g.who)
		require.ErrorIs(t, g.err, context.Canceled)
	}

	// Given back unclaimed, it is offered again, but not to whoever was
	// woken for it and skips it.
	_, err := b.Release(ctx, first.who, r.ID)
	require.NoError(t, err)
	_, ok, err := b.Notice(ctx, first.who, []string{r.ID}, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)
	other := ids[0]
	if other == first.who {
		other = ids[1]
	}
	n, ok, err := b.Notice(ctx, other, nil, testtime.Bound(time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r.ID, n.Record.ID)

	require.NoError(t, b.Depart(ctx, other))
	_, _, err = b.Notice(ctx, other, nil, time.Second)
	require.ErrorIs(t, err, actions.ErrDeparted)
}

func testSetWaiter(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	who := joinLive(t, b, "w")
	require.NoError(t, b.SetWaiter(ctx, who, true))
	ms, err := b.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.NotNil(t, ms[0].WaiterSince)
	require.NoError(t, b.SetWaiter(ctx, who, false))
	ms, err = b.Members(ctx)
	require.NoError(t, err)
	require.Nil(t, ms[0].WaiterSince)
}

// A holder whose lease ran out without its process being seen to die (here
// its recorded pid is 1, which lives) departs like a clean departure when
// its claim is reclaimed: what was addressed to it goes to its agent name.
// A member that stops renewing without departing keeps its claim, and
// what is addressed to it, until its lease runs out, to the millisecond;
// then the claim goes back and the addressed action goes to its agent name.
func testExpiredLeaseReaddresses(t *testing.T, open Opener) {
	const lease = 3 * time.Second
	clock := NewManualClock()
	opts := Options{Lease: lease, Clock: clock}
	a := open(t, "", opts)
	stale := Mint(t, "stale")
	require.NoError(t, a.Join(t.Context(), actions.Member{ID: stale, PID: 1}))
	job := post(t, a, "user:alice", "", "job")
	require.Equal(t, job.ID, next(t, a, stale).ID)
	addressed := post(t, a, "user:alice", string(stale), "for stale exactly")
	end := leaseUntil(t, a, stale)
	require.NoError(t, a.Close()) // no departure: the lease is all that is left

	b := open(t, a.Location(), opts)
	heir := joinLive(t, b, "heir")
	clock.Advance(end.Sub(clock.Now()) - time.Millisecond)
	nothingFor(t, b, heir)
	got, err := b.Get(t.Context(), addressed.ID)
	require.NoError(t, err)
	require.Equal(t, string(stale), got.To, "still addressed to stale a millisecond before its lease ends")

	clock.Advance(time.Millisecond)
	p, err := b.Next(t.Context(), heir, "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, job.ID, p.Records[0].ID, "reclaimed once the lease ran out")
	got, err = b.Get(t.Context(), addressed.ID)
	require.NoError(t, err)
	require.Equal(t, "stale", got.To, "re-addressed to the agent name")
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{To: string(stale), Title: "more"})
	require.ErrorIs(t, err, actions.ErrNotLive)
}
