package boardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// Plans: actions that wait for other actions (blocked, opening, the
// cascade), plans posted in one call, and priorities.

func init() {
	cases = append(cases,
		testCase{"PostAfterStates", testPostAfterStates},
		testCase{"PostAfterRefusals", testPostAfterRefusals},
		testCase{"LastPrerequisiteOpensAndWakes", testLastPrerequisiteOpensAndWakes},
		testCase{"CascadeDownAChainOfThree", testCascadeDownAChainOfThree},
		testCase{"CancelBlockedCascades", testCancelBlockedCascades},
		testCase{"BlockedReaddressAndDepart", testBlockedReaddressAndDepart},
		testCase{"PostPlan", testPostPlan},
		testCase{"PostPlanRefusals", testPostPlanRefusals},
		testCase{"PlanGraph", testPlanGraph},
		testCase{"PrioritiesOrderClaims", testPrioritiesOrderClaims},
		testCase{"FanInRace", testFanInRace},
	)
}

// postDraft posts d from from and requires it to succeed.
func postDraft(t *testing.T, b actions.Board, from actions.Poster, d actions.Draft) actions.Record {
	t.Helper()
	if d.Body == "" {
		d.Body = "body of " + d.Title
	}
	rec, err := b.Post(t.Context(), from, d)
	require.NoError(t, err)
	return rec
}

// get reads id and requires it to exist.
func get(t *testing.T, b actions.Board, id string) actions.Record {
	t.Helper()
	r, err := b.Get(t.Context(), id)
	require.NoError(t, err)
	return r
}

// requireState requires that id is in state want, waiting for want's
// prerequisites to be exactly blockedBy (nil when not blocked).
func requireState(t *testing.T, b actions.Board, id string, want actions.State, blockedBy ...string) actions.Record {
	t.Helper()
	r := get(t, b, id)
	require.Equal(t, want, r.State, "%s", id)
	if len(blockedBy) == 0 {
		blockedBy = nil
	}
	require.Equal(t, blockedBy, r.BlockedBy, "%s waits for", id)
	return r
}

func prio(p int) *int { return &p }

func testPostAfterStates(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	worker := joinLive(t, b, "worker")
	alice := actions.Poster("user:alice")

	a1 := postDraft(t, b, alice, actions.Draft{Title: "first"})
	require.Equal(t, actions.DefaultPriority, a1.Priority)
	require.Nil(t, a1.After)
	a2 := postDraft(t, b, alice, actions.Draft{Title: "second"})
	// A repeated prerequisite counts once; the order given is kept.
	a3 := postDraft(t, b, alice, actions.Draft{Title: "after both", After: []string{a2.ID, a1.ID, a2.ID}, Priority: prio(0)})
	require.Equal(t, actions.Blocked, a3.State)
	require.Equal(t, []string{a2.ID, a1.ID}, a3.After)
	require.Equal(t, []string{a2.ID, a1.ID}, a3.BlockedBy)
	require.Equal(t, 0, a3.Priority)
	require.Equal(t, a3, get(t, b, a3.ID), "Get reads what Post returned")

	// Blocked is never claimed, however urgent: the claim takes a1.
	require.Equal(t, a1.ID, next(t, b, worker).ID)
	done, err := b.Finish(ctx, worker, a1.ID, "ok")
	require.NoError(t, err)
	require.Nil(t, done.BlockedBy)
	requireState(t, b, a3.ID, actions.Blocked, a2.ID)

	// A done prerequisite counts as met: posted after a1 alone, it opens.
	a4 := postDraft(t, b, alice, actions.Draft{Title: "after the done one", After: []string{a1.ID}})
	require.Equal(t, actions.Open, a4.State)
	require.Equal(t, []string{a1.ID}, a4.After)
	require.Nil(t, a4.BlockedBy)

	// Every view shows what an action waits for.
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 4)
	require.Equal(t, []string{a2.ID, a1.ID}, p.Records[2].After)
	require.Equal(t, []string{a2.ID}, p.Records[2].BlockedBy)
	blocked, err := b.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{actions.Blocked}})
	require.NoError(t, err)
	require.Len(t, blocked.Records, 1)
	require.Equal(t, a3.ID, blocked.Records[0].ID)
	ch, err := b.Changes(ctx, "", 0)
	require.NoError(t, err)
	for _, r := range ch.Records {
		if r.ID == a3.ID {
			require.Equal(t, []string{a2.ID}, r.BlockedBy)
		}
	}
}

func testPostAfterRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	worker := joinLive(t, b, "worker")
	alice := actions.Poster("user:alice")
	ok := postDraft(t, b, alice, actions.Draft{Title: "fine"})
	failed := postDraft(t, b, alice, actions.Draft{Title: "will fail"})
	cancelled := postDraft(t, b, alice, actions.Draft{Title: "will be cancelled"})
	require.Equal(t, ok.ID, next(t, b, worker).ID)
	require.Equal(t, failed.ID, next(t, b, worker).ID)
	_, err := b.Fail(ctx, worker, failed.ID, "the disk is full")
	require.NoError(t, err)
	_, err = b.Cancel(ctx, alice, cancelled.ID, "not needed")
	require.NoError(t, err)

	many := make([]string, actions.MaxAfter+1)
	for i := range many {
		many[i] = fmt.Sprintf("a-%d", i+1)
	}
	for _, tc := range []struct {
		name  string
		d     actions.Draft
		want  error
		names []string
	}{
		{"unknown ids", actions.Draft{After: []string{ok.ID, "a-98", "a-99"}}, actions.ErrUnknownAction, []string{"a-98, a-99"}},
		{"not an id", actions.Draft{After: []string{"build"}}, actions.ErrUnknownPrerequisite, []string{`"build"`}},
		{"too many", actions.Draft{After: many}, actions.ErrTooManyPrerequisites, []string{"65 prerequisites"}},
		{"failed", actions.Draft{After: []string{ok.ID, failed.ID}}, actions.ErrPrerequisiteEnded,
			[]string{failed.ID + " failed by " + string(worker), "the disk is full"}},
		{"cancelled", actions.Draft{After: []string{cancelled.ID}}, actions.ErrPrerequisiteEnded,
			[]string{cancelled.ID + " was cancelled by user:alice", "not needed"}},
		{"priority", actions.Draft{Priority: prio(5)}, actions.ErrBadPriority, []string{"priority 5"}},
		{"negative priority", actions.Draft{Priority: prio(-1)}, actions.ErrBadPriority, []string{"priority -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.d.Title = tc.name
			_, err := b.Post(ctx, alice, tc.d)
			require.ErrorIs(t, err, tc.want)
			for _, s := range tc.names {
				require.ErrorContains(t, err, s)
			}
		})
	}
	// Both kinds at once are both named.
	_, err = b.Post(ctx, alice, actions.Draft{Title: "both", After: []string{"a-99", failed.ID}})
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	require.ErrorIs(t, err, actions.ErrPrerequisiteEnded)

	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 3, "nothing refused was posted")
}

// Finishing the last prerequisite opens the waiter in the same
// transaction: it is open when the finish returns, and a waiter of
// another Board on the same storage wakes for it as for a post.
func testLastPrerequisiteOpensAndWakes(t *testing.T, open Opener) {
	b := open(t, "", Options{SafetyPoll: time.Minute})
	other := open(t, b.Location(), Options{SafetyPoll: time.Minute})
	ctx := t.Context()
	worker := joinLive(t, b, "worker")
	taker := joinLive(t, other, "taker")
	alice := actions.Poster("user:alice")
	a1 := postDraft(t, b, alice, actions.Draft{To: string(worker), Title: "one"})
	a2 := postDraft(t, b, alice, actions.Draft{To: string(worker), Title: "two"})
	a3 := postDraft(t, b, alice, actions.Draft{To: "taker", Title: "after both", After: []string{a1.ID, a2.ID}})

	got := make(chan actions.Page, 1)
	go func() {
		p, err := other.Next(ctx, taker, "", 20*time.Second)
		if err != nil {
			p = actions.Page{}
		}
		got <- p
	}()
	require.Equal(t, a1.ID, next(t, b, worker).ID)
	require.Equal(t, a2.ID, next(t, b, worker).ID)
	_, err := b.Finish(ctx, worker, a1.ID, "")
	require.NoError(t, err)
	requireState(t, b, a3.ID, actions.Blocked, a2.ID)
	select {
	case p := <-got:
		t.Fatalf("the waiter took %v before its last prerequisite was done", p.Records)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	_, err = b.Finish(ctx, worker, a2.ID, "")
	require.NoError(t, err)
	// Opened with the finish (and perhaps taken since).
	require.Contains(t, []actions.State{actions.Open, actions.Claimed}, get(t, b, a3.ID).State)
	select {
	case p := <-got:
		require.Len(t, p.Records, 1)
		require.Equal(t, a3.ID, p.Records[0].ID)
		require.Equal(t, []string{a1.ID, a2.ID}, p.Records[0].After)
		require.Less(t, time.Since(start), 10*time.Second, "woken well before the safety poll")
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not woken when its action opened")
	}
}

// A failed prerequisite cancels its waiters down a chain of three, in
// the same transaction, each with a reason naming its prerequisite, ended
// by the one who failed it; their posters hear of each.
func testCascadeDownAChainOfThree(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := joinLive(t, b, "lead")
	worker := joinLive(t, b, "worker")
	root := post(t, b, lead, "worker", "migrate")
	chain := []actions.Record{root}
	for i := range 3 {
		chain = append(chain, postDraft(t, b, actions.Agent(lead), actions.Draft{To: "worker", Title: fmt.Sprintf("step %d", i+1),
			After: []string{chain[len(chain)-1].ID}}))
	}
	person := postDraft(t, b, "user:alice", actions.Draft{Title: "alice's", After: []string{chain[1].ID}})
	require.Equal(t, root.ID, next(t, b, worker).ID)
	_, err := b.Fail(ctx, worker, root.ID, "the database is read-only")
	require.NoError(t, err)

	want := []string{
		"prerequisite " + root.ID + " failed: the database is read-only",
		"prerequisite " + chain[1].ID + " was cancelled: prerequisite " + root.ID + " failed: the database is read-only",
		"prerequisite " + chain[2].ID + " was cancelled: prerequisite " + root.ID + " failed: the database is read-only",
	}
	for i, r := range chain[1:] {
		got := requireState(t, b, r.ID, actions.Cancelled)
		require.Equal(t, want[i], got.Reason)
		require.Equal(t, string(worker), got.EndedBy)
		require.Empty(t, got.Holder)
		require.NotNil(t, got.EndedAt)
	}
	require.Equal(t, "prerequisite "+chain[1].ID+" was cancelled: prerequisite "+root.ID+" failed: the database is read-only",
		requireState(t, b, person.ID, actions.Cancelled).Reason)

	// The lead hears of every outcome: the failure and the three
	// cancellations, oldest end first; alice (a person) asks, and is not
	// told.
	var heard []string
	for range 4 {
		n, ok, err := b.Notice(ctx, lead, nil, 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, actions.NoticeOutcome, n.Kind)
		heard = append(heard, n.Record.ID)
	}
	require.ElementsMatch(t, []string{root.ID, chain[1].ID, chain[2].ID, chain[3].ID}, heard)
	_, ok, err := b.Notice(ctx, lead, nil, 0)
	require.NoError(t, err)
	require.False(t, ok, "each outcome is told once")

	// An Await on the end of the chain returns at once.
	recs, err := b.Await(ctx, actions.Agent(lead), []string{chain[3].ID}, time.Second)
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

// Cancelling a blocked action is allowed and cascades; a cancel's reason
// is carried, or left out when there is none.
func testCancelBlockedCascades(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := joinLive(t, b, "lead")
	first := post(t, b, lead, "", "first")
	mid := postDraft(t, b, actions.Agent(lead), actions.Draft{Title: "mid", After: []string{first.ID}})
	last := postDraft(t, b, actions.Agent(lead), actions.Draft{Title: "last", After: []string{mid.ID}})
	other := postDraft(t, b, actions.Agent(lead), actions.Draft{Title: "other", After: []string{first.ID}})

	c, err := b.Cancel(ctx, actions.Agent(lead), mid.ID, "plan changed")
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, c.State)
	got := requireState(t, b, last.ID, actions.Cancelled)
	require.Equal(t, "prerequisite "+mid.ID+" was cancelled: plan changed", got.Reason)
	require.Equal(t, string(lead), got.EndedBy)
	requireState(t, b, first.ID, actions.Open)
	requireState(t, b, other.ID, actions.Blocked, first.ID)
	// The lead cancelled mid itself, and hears of last only.
	n, ok, err := b.Notice(ctx, lead, nil, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, last.ID, n.Record.ID)
	// (first is open to anyone: Notice would claim it for the idle lead.)
	n2, ok, err := b.Notice(ctx, lead, []string{first.ID}, 0)
	require.NoError(t, err)
	require.False(t, ok, "%+v", n2)

	_, err = b.Cancel(ctx, "user:alice", first.ID, "")
	require.NoError(t, err)
	got = requireState(t, b, other.ID, actions.Cancelled)
	require.Equal(t, "prerequisite "+first.ID+" was cancelled", got.Reason)
	require.Equal(t, "user:alice", got.EndedBy)

	// A reason as long as a reason may be is cut to fit its waiter's.
	long := post(t, b, lead, "", "long")
	waiter := postDraft(t, b, actions.Agent(lead), actions.Draft{Title: "waiter", After: []string{long.ID}})
	_, err = b.Cancel(ctx, actions.Agent(lead), long.ID, strings.Repeat("é", actions.MaxResultLen/2))
	require.NoError(t, err)
	got = requireState(t, b, waiter.ID, actions.Cancelled)
	require.LessOrEqual(t, len(got.Reason), actions.MaxResultLen)
	require.True(t, strings.HasPrefix(got.Reason, "prerequisite "+long.ID+" was cancelled: éé"), got.Reason[:60])
	require.True(t, strings.HasSuffix(got.Reason, "é…"))
}

// A blocked action can be re-addressed, wakes nobody meanwhile, and goes
// with an identity's other open actions to its agent name when it
// departs.
func testBlockedReaddressAndDepart(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	worker := joinLive(t, b, "worker")
	first := post(t, b, worker, string(worker), "first")
	blocked := postDraft(t, b, "user:alice", actions.Draft{To: string(worker), Title: "later", After: []string{first.ID}})
	re, err := b.Readdress(ctx, "user:alice", blocked.ID, "reviewer")
	require.NoError(t, err)
	require.Equal(t, actions.Blocked, re.State)
	require.Equal(t, "reviewer", re.To)
	require.Equal(t, []string{first.ID}, re.BlockedBy)
	_, err = b.Readdress(ctx, "user:alice", blocked.ID, string(worker))
	require.NoError(t, err)

	require.NoError(t, b.Depart(ctx, worker))
	require.Equal(t, "worker", get(t, b, blocked.ID).To, "re-addressed to its agent name on departure")
	require.Equal(t, actions.Blocked, get(t, b, blocked.ID).State)
}

func testPostPlan(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := joinLive(t, b, "lead")
	worker := joinLive(t, b, "worker")
	before := post(t, b, lead, "", "already there")
	done := post(t, b, lead, string(worker), "already done")
	require.Equal(t, before.ID, next(t, b, worker).ID)
	require.Equal(t, done.ID, next(t, b, worker).ID)
	_, err := b.Finish(ctx, worker, done.ID, "")
	require.NoError(t, err)

	// Keys in any order: "test" names "build", which comes after it.
	plan := []actions.PlanEntry{
		{Key: "test", To: "worker", Title: "test", After: []string{"build", before.ID}, Priority: prio(1)},
		{Key: "build", To: "worker", Title: "build", After: []string{done.ID}},
		{Key: "ship", Title: "ship", After: []string{"test", "build"}},
	}
	got, err := b.PostPlan(ctx, actions.Agent(lead), plan)
	require.NoError(t, err)
	require.Len(t, got.Records, 3)
	test, build, ship := got.Records[0], got.Records[1], got.Records[2]
	require.Equal(t, map[string]string{"test": test.ID, "build": build.ID, "ship": ship.ID}, got.IDs)
	require.Equal(t, "test", test.Title)
	require.Less(t, build.Seq, test.Seq, "prerequisites are posted first")
	require.Equal(t, actions.Open, build.State, "its one prerequisite is done")
	require.Equal(t, []string{done.ID}, build.After)
	require.Equal(t, actions.Blocked, test.State)
	require.Equal(t, []string{build.ID, before.ID}, test.After)
	require.Equal(t, []string{build.ID, before.ID}, test.BlockedBy)
	require.Equal(t, 1, test.Priority)
	require.Equal(t, []string{test.ID, build.ID}, ship.BlockedBy)
	require.Equal(t, string(lead), ship.From)
	for _, r := range got.Records {
		require.Equal(t, r, get(t, b, r.ID))
	}

	// The plan runs: build, then (once before is done too) test, then ship.
	require.Equal(t, build.ID, next(t, b, worker).ID)
	_, err = b.Finish(ctx, worker, build.ID, "")
	require.NoError(t, err)
	requireState(t, b, test.ID, actions.Blocked, before.ID)
	_, err = b.Finish(ctx, worker, before.ID, "")
	require.NoError(t, err)
	requireState(t, b, test.ID, actions.Open)
	require.Equal(t, test.ID, next(t, b, worker).ID)
	_, err = b.Finish(ctx, worker, test.ID, "")
	require.NoError(t, err)
	requireState(t, b, ship.ID, actions.Open)
}

// A plan refused is refused whole, naming each problem, and posts
// nothing.
func testPostPlanRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	lead := joinLive(t, b, "lead")
	worker := joinLive(t, b, "worker")
	gone := joinLive(t, b, "gone")
	require.NoError(t, b.Depart(ctx, gone))
	failed := post(t, b, lead, string(worker), "fails")
	require.Equal(t, failed.ID, next(t, b, worker).ID)
	_, err := b.Fail(ctx, worker, failed.ID, "no")
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		plan  []actions.PlanEntry
		want  []error
		names []string
	}{
		{"cycle", []actions.PlanEntry{{Key: "a", Title: "a", After: []string{"c"}}, {Key: "b", Title: "b", After: []string{"a"}},
			{Key: "c", Title: "c", After: []string{"b"}}, {Key: "free", Title: "free"}},
			[]error{actions.ErrCycle}, []string{`"a" → "c" → "b" → "a"`}},
		{"unknown key", []actions.PlanEntry{{Key: "a", Title: "a", After: []string{"nope"}}, {Key: "b", Title: "b", After: []string{"Nope", "a"}}},
			[]error{actions.ErrUnknownPrerequisite}, []string{`(key "a")`, `(key "b")`, `"nope"`, `"Nope"`}},
		{"unknown ids", []actions.PlanEntry{{Key: "a", Title: "a", After: []string{"a-99"}}, {Key: "b", Title: "b", After: []string{"a", "a-98"}}},
			[]error{actions.ErrUnknownAction}, []string{`(key "a"): after a-99: no such action`, `(key "b"): after a-98`}},
		{"duplicate key", []actions.PlanEntry{{Key: "a", Title: "a"}, {Key: "a", Title: "again"}},
			[]error{actions.ErrDuplicateKey}, nil},
		{"ended prerequisite", []actions.PlanEntry{{Key: "a", Title: "a"}, {Key: "b", Title: "b", After: []string{"a", failed.ID}}},
			[]error{actions.ErrPrerequisiteEnded}, []string{`(key "b")`, failed.ID + " failed"}},
		{"not live", []actions.PlanEntry{{Key: "a", To: string(gone), Title: "a"}},
			[]error{actions.ErrNotLive}, []string{`(key "a")`, "has departed"}},
		{"priority", []actions.PlanEntry{{Key: "a", Title: "a", Priority: prio(9)}},
			[]error{actions.ErrBadPriority}, nil},
		{"empty", nil, []error{actions.ErrBadPlan}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.PostPlan(ctx, actions.Agent(lead), tc.plan)
			require.ErrorIs(t, err, actions.ErrBadPlan)
			var pe *actions.PlanError
			require.True(t, errors.As(err, &pe), "%v", err)
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			for _, s := range tc.names {
				require.ErrorContains(t, err, s)
			}
		})
	}
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 1, "no refused plan posted anything")
}

func testPlanGraph(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	alice := actions.Poster("user:alice")
	alone := postDraft(t, b, alice, actions.Draft{Title: "alone"})
	got, err := b.PostPlan(ctx, alice, []actions.PlanEntry{
		{Key: "a", Title: "a"}, {Key: "b", Title: "b", After: []string{"a"}}, {Key: "c", Title: "c", After: []string{"a"}},
		{Key: "d", Title: "d", After: []string{"c", "b"}},
	})
	require.NoError(t, err)
	id := got.IDs
	// A later action that waits for d joins the plan.
	e := postDraft(t, b, alice, actions.Draft{Title: "e", After: []string{id["d"], alone.ID}})

	wantIDs := []string{alone.ID, id["a"], id["b"], id["c"], id["d"], e.ID}
	wantEdges := []actions.PlanEdge{{Before: id["a"], After: id["b"]}, {Before: id["a"], After: id["c"]},
		{Before: id["c"], After: id["d"]}, {Before: id["b"], After: id["d"]}, {Before: id["d"], After: e.ID}, {Before: alone.ID, After: e.ID}}
	for _, from := range []string{id["c"], alone.ID, e.ID} {
		g, err := b.Plan(ctx, from)
		require.NoError(t, err)
		ids := make([]string, len(g.Records))
		for i, r := range g.Records {
			ids[i] = r.ID
		}
		require.Equal(t, wantIDs, ids, "from %s", from)
		require.Equal(t, wantEdges, g.Edges, "from %s", from)
	}

	single := postDraft(t, b, alice, actions.Draft{Title: "single"})
	g, err := b.Plan(ctx, single.ID)
	require.NoError(t, err)
	require.Len(t, g.Records, 1)
	require.NotNil(t, g.Edges)
	require.Empty(t, g.Edges)
	_, err = b.Plan(ctx, "a-999")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	_, err = b.Plan(ctx, "bogus")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
}

// A wait claims the most urgent open action it may take, oldest first
// within a priority, whoever it is addressed to.
func testPrioritiesOrderClaims(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	worker := joinLive(t, b, "worker")
	alice := actions.Poster("user:alice")
	var want []string
	posted := map[string]actions.Record{}
	for i, p := range []struct {
		prio int
		to   string
	}{{2, ""}, {4, ""}, {0, "worker"}, {1, ""}, {0, ""}, {2, string(worker)}, {1, "worker"}, {4, "other"}, {3, ""}} {
		r := postDraft(t, b, alice, actions.Draft{To: p.to, Title: fmt.Sprintf("p%d #%d", p.prio, i), Priority: prio(p.prio)})
		posted[r.ID] = r
	}
	for _, title := range []string{"p0 #2", "p0 #4", "p1 #3", "p1 #6", "p2 #0", "p2 #5", "p3 #8", "p4 #1"} {
		for id, r := range posted {
			if r.Title == title {
				want = append(want, id)
			}
		}
	}
	var got []string
	for range want {
		got = append(got, next(t, b, worker).ID)
	}
	require.Equal(t, want, got)
	nothingFor(t, b, worker)
}

// EnvFanInTrials sets how many trials FanInRace runs (default 20).
const EnvFanInTrials = "BEE_BOARDTEST_FANIN"

// Two prerequisites finished at the same moment by two processes open
// their waiter exactly once, never before both are done, and it is
// claimed exactly once, by one of two waiters that wait for it on
// another Board: trial after trial.
func testFanInRace(t *testing.T, open Opener) {
	b := open(t, "", Options{SafetyPoll: time.Minute})
	ctx := t.Context()
	trials := 20
	if n := EnvMillis(EnvFanInTrials); n > 0 {
		trials = int(n / time.Millisecond)
	}
	procs := [2]*Proc{StartProc(t, "worker", b.Location()), StartProc(t, "worker", b.Location())}
	var workers [2]identity.ID
	for i, p := range procs {
		workers[i] = identity.ID(strings.TrimPrefix(p.Expect("ready ", 30*time.Second), "ready "))
	}
	takers := [2]identity.ID{joinLive(t, b, "fanin"), joinLive(t, b, "fanin")}
	for trial := range trials {
		var pre [2]actions.Record
		for i := range pre {
			pre[i] = postDraft(t, b, "user:alice", actions.Draft{To: string(workers[i]), Title: fmt.Sprintf("trial %d half %d", trial, i)})
		}
		dep := postDraft(t, b, "user:alice", actions.Draft{To: "fanin", Title: fmt.Sprintf("trial %d", trial), After: []string{pre[0].ID, pre[1].ID}})
		for i, p := range procs {
			p.Send("claim")
			require.Equal(t, "claimed "+pre[i].ID, p.Expect("claimed ", 10*time.Second))
		}
		claims := make(chan actions.Record, 2)
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, who := range takers {
			wg.Go(func() {
				p, err := b.Next(wctx, who, "", 30*time.Second)
				for _, r := range p.Records {
					claims <- r
				}
				if err == nil && len(p.Records) == 0 {
					claims <- actions.Record{}
				}
			})
		}
		at := time.Now().Add(20 * time.Millisecond).UnixNano()
		for i, p := range procs {
			p.Send(fmt.Sprintf("finishat %s %d", pre[i].ID, at))
		}
		for i, p := range procs {
			require.Equal(t, "ended "+pre[i].ID+" done", p.Expect("ended ", 10*time.Second))
		}
		var got actions.Record
		select {
		case got = <-claims:
		case <-time.After(20 * time.Second):
			cancel()
			wg.Wait()
			t.Fatalf("trial %d: %s never opened: %+v", trial, dep.ID, get(t, b, dep.ID))
		}
		cancel()
		wg.Wait()
		require.Equal(t, dep.ID, got.ID, "trial %d", trial)
		select {
		case r := <-claims:
			require.Empty(t, r.ID, "trial %d: claimed twice", trial)
		default:
		}
		for i := range pre {
			p := requireState(t, b, pre[i].ID, actions.Done)
			require.False(t, got.ClaimedAt.Before(*p.EndedAt), "trial %d: claimed at %v, before %s ended at %v", trial, got.ClaimedAt, p.ID, p.EndedAt)
		}
		_, err := b.Finish(ctx, identity.ID(got.Holder), got.ID, "")
		require.NoError(t, err)
	}
	for _, p := range procs {
		p.Finish(10 * time.Second)
	}
}
