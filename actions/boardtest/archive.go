package boardtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
)

// Ended actions, read back through every view: a board may keep them
// apart from the live ones (see issue 22), and no view may tell.

// testEndedEveryView ends actions every way (done, failed, cancelled
// while open, and a plan step cancelled with its plan) and reads them
// back through Get, List (all, by state, mixed), Changes, Await, Notice's
// outcomes, Plan and a prerequisite named by a later post; seqs and
// change order survive the end, and ids are never reused.
func testEndedEveryView(t *testing.T, open Opener) {
	// Pages of 2: a page ends among the ended actions, and the next
	// resumes there.
	b := open(t, "", Options{PageSize: 2})
	ctx := t.Context()
	poster := joinLive(t, b, "lead")
	worker := joinLive(t, b, "worker")
	head, err := b.Head(ctx)
	require.NoError(t, err)

	a := post(t, b, poster, "worker", "step one")
	bStep, err := b.Post(ctx, actions.Agent(poster), actions.Draft{To: "worker", Title: "step two", After: []string{a.ID}})
	require.NoError(t, err)
	require.Equal(t, actions.Blocked, bStep.State)
	cStep, err := b.Post(ctx, actions.Agent(poster), actions.Draft{To: "worker", Title: "step three", After: []string{bStep.ID}})
	require.NoError(t, err)
	d := post(t, b, poster, "nobody-yet", "cancel me while open")

	// done: its waiter opens, and a later post after it is open at once.
	require.Equal(t, a.ID, next(t, b, worker).ID)
	_, err = b.Finish(ctx, worker, a.ID, "one done")
	require.NoError(t, err)
	got, err := b.Get(ctx, bStep.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State, "the step after a done one opens")
	f, err := b.Post(ctx, actions.Agent(poster), actions.Draft{To: "nobody-yet", Title: "after a done one", After: []string{a.ID}})
	require.NoError(t, err)
	require.Equal(t, actions.Open, f.State, "a prerequisite that ended done is found")
	require.Equal(t, []string{a.ID}, f.After)
	require.Empty(t, f.BlockedBy)

	// failed: the plan's next step is cancelled with it.
	require.Equal(t, bStep.ID, next(t, b, worker).ID)
	_, err = b.Fail(ctx, worker, bStep.ID, "no disk")
	require.NoError(t, err)
	// cancelled while open, by a person.
	_, err = b.Cancel(ctx, "user:alice", d.ID, "not needed")
	require.NoError(t, err)

	want := map[string]actions.State{a.ID: actions.Done, bStep.ID: actions.Failed, cStep.ID: actions.Cancelled,
		d.ID: actions.Cancelled, f.ID: actions.Open}
	order := []string{a.ID, bStep.ID, cStep.ID, d.ID, f.ID}

	// Get.
	for id, st := range want {
		r, err := b.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, st, r.State, id)
	}
	r, err := b.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, "one done", r.Result)
	require.Equal(t, string(worker), r.Holder)
	require.NotNil(t, r.EndedAt)
	r, err = b.Get(ctx, cStep.ID)
	require.NoError(t, err)
	require.Equal(t, []string{bStep.ID}, r.After, "an ended step keeps what it waited for")
	require.NotEmpty(t, r.Reason)

	// List, page by page: all in posting order; by state; live and ended
	// mixed.
	ids := func(recs []actions.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	list := func(f actions.ListFilter) []actions.Record {
		t.Helper()
		var recs []actions.Record
		for cursor := actions.Cursor(""); ; {
			p, err := b.ListFiltered(ctx, cursor, f)
			require.NoError(t, err)
			if len(p.Records) == 0 {
				return recs
			}
			require.LessOrEqual(t, len(p.Records), 2)
			recs = append(recs, p.Records...)
			cursor = p.Cursor
		}
	}
	all := list(actions.ListFilter{})
	require.Equal(t, order, ids(all))
	for _, r := range all {
		require.Equal(t, want[r.ID], r.State, r.ID)
	}
	for _, tc := range []struct {
		states []actions.State
		want   []string
	}{
		{[]actions.State{actions.Done, actions.Failed, actions.Cancelled}, []string{a.ID, bStep.ID, cStep.ID, d.ID}},
		{[]actions.State{actions.Cancelled}, []string{cStep.ID, d.ID}},
		{[]actions.State{actions.Open, actions.Blocked, actions.Claimed}, []string{f.ID}},
		{[]actions.State{actions.Open, actions.Done}, []string{a.ID, f.ID}},
	} {
		require.Equal(t, tc.want, ids(list(actions.ListFilter{States: tc.states})), "%v", tc.states)
	}

	// Changes, page by page: every ending is a change; each action's last
	// change has its final state.
	last := map[string]actions.Record{}
	var seen []string
	cursor := head
	deadline := time.Now().Add(testtime.Bound(10 * time.Second))
	for len(last) < len(order) || last[cStep.ID].State != actions.Cancelled || last[d.ID].State != actions.Cancelled {
		require.True(t, time.Now().Before(deadline), "changes seen: %v", seen)
		p, err := b.Changes(ctx, cursor, testtime.Bound(time.Second))
		require.NoError(t, err)
		for _, r := range p.Records {
			last[r.ID] = r
			seen = append(seen, r.ID+":"+string(r.State))
		}
		cursor = p.Cursor
	}
	for id, st := range want {
		require.Equal(t, st, last[id].State, "%s: changes %v", id, seen)
	}
	again, err := b.Changes(ctx, cursor, 50*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, again.Records, "each change reported once")

	// Await and outcomes: the poster hears of an ended one nobody told it
	// of; Await returns the ended among live ones.
	n, ok, err := b.Notice(ctx, poster, nil, testtime.Bound(time.Second))
	require.NoError(t, err)
	require.True(t, ok, "an untold outcome")
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, a.ID, n.Record.ID, "the oldest ending first")
	ended, err := b.Await(ctx, actions.Agent(poster), []string{f.ID, bStep.ID}, testtime.Bound(time.Second))
	require.NoError(t, err)
	require.Len(t, ended, 1)
	require.Equal(t, bStep.ID, ended[0].ID)
	require.Equal(t, actions.Failed, ended[0].State)

	// Plan: the steps, ended or not, and their edges.
	g, err := b.Plan(ctx, cStep.ID)
	require.NoError(t, err)
	var planIDs []string
	for _, r := range g.Records {
		planIDs = append(planIDs, r.ID)
	}
	require.Equal(t, []string{a.ID, bStep.ID, cStep.ID, f.ID}, planIDs)
	require.Len(t, g.Edges, 3)

	// Ids are never reused, and a new post is a change after the ends.
	g2 := post(t, b, poster, "", "later")
	require.Greater(t, g2.Seq, f.Seq)
	p, err := b.Changes(ctx, cursor, testtime.Bound(time.Second))
	require.NoError(t, err)
	require.Equal(t, []string{g2.ID}, ids(p.Records))
}

// An OldAction is a row of EndedFixture, as a board's migration test
// writes it in the schema before its ended actions moved.
type OldAction struct {
	State, Holder string
	Text          string // the result of a done action, else the reason
	By            string // who ended it
	Told          bool   // its poster has heard of its end
}

// The identities EndedFixture's actions name.
const (
	FixturePoster = "agent:old#00000003"
	FixtureWorker = "agent:old#00000001" // a member, live for an hour
)

// EndedFixture is what a board's migration test writes before ended
// actions moved, seq by seq from 1 (index 0 unused): posted by
// FixturePoster to "someone", titled "old job <seq>"; seq 3 waits for 1
// and 2 (edges in that order), and seq 7 is deleted afterwards (its seq
// must not come back). CheckEndedFixture reads it back.
var EndedFixture = []OldAction{
	1: {"done", FixtureWorker, "it worked", FixtureWorker, false},
	2: {"claimed", FixtureWorker, "", "", false},
	3: {"blocked", "", "", "", false},
	4: {"failed", FixtureWorker, "no disk", FixtureWorker, true},
	5: {"cancelled", "", "not needed", "user:alice", true},
	6: {"open", "", "", "", false},
	7: {"done", FixtureWorker, "gone", FixtureWorker, true},
}

// CheckEndedFixture reads EndedFixture back through b's views once b has
// migrated it: every action as it was, a blocked action's prerequisite
// that ended done before the migration counted done, the outcome nobody
// was told of told once, the claimed one finished (its waiter opens), and
// a new post's seq is 8.
func CheckEndedFixture(t *testing.T, b actions.Board) {
	t.Helper()
	ctx := t.Context()
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 6)
	for _, r := range p.Records {
		want := EndedFixture[r.Seq]
		require.Equal(t, fmt.Sprintf("old job %d", r.Seq), r.Title)
		require.Equal(t, actions.State(want.State), r.State, r.ID)
		require.Equal(t, want.Holder, r.Holder, r.ID)
		require.Equal(t, want.Text, r.Result+r.Reason, r.ID)
		require.Equal(t, want.By, r.EndedBy, r.ID)
	}
	blocked, err := b.Get(ctx, "a-3")
	require.NoError(t, err)
	require.Equal(t, []string{"a-1", "a-2"}, blocked.After)
	require.Equal(t, []string{"a-2"}, blocked.BlockedBy, "a-1 ended done before the migration")
	ended, err := b.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{actions.Done, actions.Failed, actions.Cancelled}})
	require.NoError(t, err)
	require.Len(t, ended.Records, 3)

	// The outcome nobody was told of is told once.
	n, ok, err := b.Notice(ctx, FixturePoster, nil, testtime.Bound(5*time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, "a-1", n.Record.ID)
	_, ok, err = b.Notice(ctx, FixturePoster, nil, 200*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "told once")

	// Ending the claimed one opens its waiter.
	done, err := b.Finish(ctx, FixtureWorker, "a-2", "late")
	require.NoError(t, err)
	require.Equal(t, actions.Done, done.State)
	opened, err := b.Get(ctx, "a-3")
	require.NoError(t, err)
	require.Equal(t, actions.Open, opened.State)

	rec, err := b.Post(ctx, actions.Agent(Mint(t, "new")), actions.Draft{Title: "new"})
	require.NoError(t, err)
	require.Equal(t, "a-8", rec.ID, "no seq comes back")
}
