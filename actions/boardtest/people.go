package boardtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// People in the loop: an agent asks a person (to "user:<name>") or people
// (to "people"); no agent takes it; a person answers or declines it, or
// the asker cancels it; the asker hears of it exactly once.

func init() {
	cases = append(cases,
		testCase{"PeopleNeverClaimedByAgents", testPeopleNeverClaimedByAgents},
		testCase{"PeopleAnswered", testPeopleAnswered},
		testCase{"PeopleAnswerRefusals", testPeopleAnswerRefusals},
		testCase{"PeopleDeclined", testPeopleDeclined},
		testCase{"PeopleCancelledByAsker", testPeopleCancelledByAsker},
	)
}

// ask posts a question from the agent identity asker to to.
func ask(t *testing.T, b actions.Board, asker identity.ID, to, title string) actions.Record {
	t.Helper()
	rec := post(t, b, asker, to, title)
	require.Equal(t, to, rec.To)
	require.Equal(t, actions.Open, rec.State)
	return rec
}

// noNotice requires that who has no news within a short while.
func noNotice(t *testing.T, b actions.Board, who identity.ID) {
	t.Helper()
	n, ok, err := b.Notice(t.Context(), who, nil, 100*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "%s heard of %+v", who, n)
}

// heardOnce requires that who's next notice is the outcome of id, in state
// want, and that nothing follows it.
func heardOnce(t *testing.T, b actions.Board, who identity.ID, id string, want actions.State) actions.Record {
	t.Helper()
	n, ok, err := b.Notice(t.Context(), who, nil, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "%s heard nothing of %s", who, id)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, id, n.Record.ID)
	require.Equal(t, want, n.Record.State)
	noNotice(t, b, who)
	return n.Record
}

func testPeopleNeverClaimedByAgents(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	other := open(t, b.Location(), Options{})
	ctx := t.Context()
	lead, worker := Mint(t, "lead"), Mint(t, "worker")
	join(t, b, lead)
	join(t, other, worker)

	one := ask(t, b, lead, "user:alice", "approve the migration?")
	anyone := ask(t, b, lead, actions.People, "which design?")
	_, err := b.Post(ctx, actions.Agent(lead), actions.Draft{To: "user:bad name", Title: "x"})
	require.ErrorIs(t, err, actions.ErrBadRecipient)
	_, err = identity.Mint(actions.People)
	require.ErrorIs(t, err, identity.ErrBadName, "no agent may be named people")

	// Neither the asker, another agent, nor either's idle waiter takes
	// them, in this process or another.
	nothingFor(t, b, lead)
	nothingFor(t, other, worker)
	noNotice(t, b, lead)
	noNotice(t, other, worker)

	// An agent's action sent to people is not claimable either; sent back
	// to anyone, it is.
	job := post(t, b, lead, "", "a job")
	r, err := b.Readdress(ctx, actions.Agent(lead), job.ID, actions.People)
	require.NoError(t, err)
	require.Equal(t, actions.People, r.To)
	r, err = b.Readdress(ctx, "user:alice", job.ID, "user:bob")
	require.NoError(t, err)
	require.Equal(t, "user:bob", r.To)
	nothingFor(t, other, worker)
	_, err = b.Readdress(ctx, "user:bob", job.ID, "")
	require.NoError(t, err)
	require.Equal(t, job.ID, next(t, other, worker).ID)

	for _, id := range []string{one.ID, anyone.ID} {
		got, err := b.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, actions.Open, got.State, "%s", id)
		require.Empty(t, got.Holder)
	}
}

func testPeopleAnswered(t *testing.T, open Opener) {
	b := open(t, "", Options{SafetyPoll: 30 * time.Second})
	other := open(t, b.Location(), Options{})
	ctx := t.Context()
	lead := Mint(t, "lead")
	join(t, b, lead)
	q := ask(t, b, lead, "user:alice", "approve the migration?")

	// The asker's idle waiter sleeps until the answer, given in another
	// process, wakes it (not the safety poll).
	type result struct {
		n   actions.Notice
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	go func() {
		n, ok, err := b.Notice(ctx, lead, nil, 20*time.Second)
		ch <- result{n, ok, err}
	}()
	time.Sleep(50 * time.Millisecond) // let it sleep first; it is woken either way
	start := time.Now()
	a, err := other.Answer(ctx, "user:alice", q.ID, "yes, run it tonight")
	require.NoError(t, err)
	require.Equal(t, actions.Done, a.State)
	require.Equal(t, "yes, run it tonight", a.Result)
	require.Equal(t, "user:alice", a.EndedBy)
	require.Equal(t, "user:alice", a.Holder)
	require.NotNil(t, a.EndedAt)
	r := <-ch
	require.NoError(t, r.err)
	require.True(t, r.ok, "the asker heard nothing")
	require.Less(t, time.Since(start), 10*time.Second, "woken by the answer, not the safety poll")
	require.Equal(t, actions.NoticeOutcome, r.n.Kind)
	require.Equal(t, q.ID, r.n.Record.ID)
	require.Equal(t, "yes, run it tonight", r.n.Record.Result)
	noNotice(t, b, lead) // once

	// Answered, it never changes again.
	_, err = b.Answer(ctx, "user:alice", q.ID, "no, wait")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "user:alice")
	_, err = b.Decline(ctx, "user:alice", q.ID, "changed my mind")
	require.ErrorIs(t, err, actions.ErrEnded)
	_, err = b.Cancel(ctx, actions.Agent(lead), q.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)

	// A question for people: any person answers, once. An asker whose
	// identity departed meanwhile (a /clear) hears of it as its agent's
	// next identity.
	p := ask(t, b, lead, actions.People, "which design?")
	require.NoError(t, b.Depart(ctx, lead))
	a, err = b.Answer(ctx, "user:bob", p.ID, "the second")
	require.NoError(t, err)
	require.Equal(t, "user:bob", a.Holder)
	_, err = other.Answer(ctx, "user:carol", p.ID, "the first")
	require.ErrorIs(t, err, actions.ErrEnded)
	successor := Mint(t, "lead")
	join(t, b, successor)
	got := heardOnce(t, b, successor, p.ID, actions.Done)
	require.Equal(t, "the second", got.Result)
}

func testPeopleAnswerRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := Mint(t, "lead")
	join(t, b, lead)
	q := ask(t, b, lead, "user:alice", "approve?")
	job := post(t, b, lead, "worker", "a job for an agent")

	_, err := b.Answer(ctx, "user:bob", q.ID, "yes")
	require.ErrorIs(t, err, actions.ErrNotForPerson)
	require.ErrorContains(t, err, "user:alice", "the refusal names whom it is for")
	_, err = b.Decline(ctx, "user:bob", q.ID, "no")
	require.ErrorIs(t, err, actions.ErrNotForPerson)
	_, err = b.Answer(ctx, actions.Agent(lead), q.ID, "I approve myself")
	require.ErrorIs(t, err, actions.ErrBadPoster, "an agent does not answer a person's question")
	_, err = b.Answer(ctx, "user:alice", job.ID, "done")
	require.ErrorIs(t, err, actions.ErrNotForPerson)
	require.ErrorContains(t, err, "worker")
	_, err = b.Answer(ctx, "user:alice", q.ID, "  ")
	require.ErrorIs(t, err, actions.ErrEmptyAnswer)
	_, err = b.Decline(ctx, "user:alice", q.ID, "")
	require.ErrorIs(t, err, actions.ErrEmptyReason)
	_, err = b.Answer(ctx, "user:alice", "a-99", "yes")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	_, err = b.Answer(ctx, "user:alice", q.ID, string(make([]byte, actions.MaxResultLen+1)))
	require.ErrorIs(t, err, actions.ErrTooLong)
	// An agent's finish of a question it never held is refused too.
	_, err = b.Finish(ctx, lead, q.ID, "yes")
	require.ErrorIs(t, err, actions.ErrNotHeld)

	got, err := b.Get(ctx, q.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State, "no refusal changed it")
	noNotice(t, b, lead)
}

func testPeopleDeclined(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	other := open(t, b.Location(), Options{})
	ctx := t.Context()
	lead := Mint(t, "lead")
	join(t, b, lead)
	q := ask(t, b, lead, actions.People, "give me the production password")

	d, err := other.Decline(ctx, "user:alice", q.ID, "never: ask ops for a scoped token")
	require.NoError(t, err)
	require.Equal(t, actions.Failed, d.State)
	require.Equal(t, "never: ask ops for a scoped token", d.Reason)
	require.Equal(t, "user:alice", d.EndedBy)
	require.Equal(t, "user:alice", d.Holder)
	got := heardOnce(t, b, lead, q.ID, actions.Failed)
	require.Equal(t, d.Reason, got.Reason)

	// Awaited instead, the outcome is told there, and not again.
	q2 := ask(t, b, lead, "user:alice", "again?")
	_, err = other.Decline(ctx, "user:alice", q2.ID, "no")
	require.NoError(t, err)
	recs, err := b.Await(ctx, actions.Agent(lead), []string{q2.ID}, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, actions.Failed, recs[0].State)
	noNotice(t, b, lead)
}

func testPeopleCancelledByAsker(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := Mint(t, "lead")
	join(t, b, lead)

	// The asker withdraws its question: it knows, so nothing wakes it.
	q := ask(t, b, lead, "user:alice", "approve?")
	c, err := b.Cancel(ctx, actions.Agent(lead), q.ID, "found the answer in the docs")
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, c.State)
	require.Empty(t, c.Holder)
	noNotice(t, b, lead)
	_, err = b.Answer(ctx, "user:alice", q.ID, "yes")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "cancelled by "+string(lead))

	// Another identity of the asker's agent (after a /clear) cancels one:
	// the asker hears of it once. So does a person's cancel.
	q2 := ask(t, b, lead, actions.People, "which?")
	_, err = b.Cancel(ctx, actions.Agent(Mint(t, "lead")), q2.ID, "")
	require.NoError(t, err)
	heardOnce(t, b, lead, q2.ID, actions.Cancelled)
	q3 := ask(t, b, lead, "user:alice", "and this?")
	_, err = b.Cancel(ctx, "user:bob", q3.ID, "alice is away")
	require.NoError(t, err)
	got := heardOnce(t, b, lead, q3.ID, actions.Cancelled)
	require.Equal(t, "alice is away", got.Reason)
}
