// Package boardtest is what the tests of every actions.Board share: the
// same code, not copies, for the embedded board (actions/board), the
// PostgreSQL board (actions/pgboard) and their side-by-side benchmarks
// (actions/boards).
//
//   - The contract suite: a board's own package calls Run with a function
//     that opens a board; tests of what only one board has (its files, its
//     server, its hooks) stay in that board's package.
//   - Worker roles across processes: TestMain calls RunRole, and a test
//     starts the test binary again as a role with StartProc, then talks to
//     it over lines (Proc).
//   - Measures for benchmarks (CPUTime, ReportLatency) and waits on wake-up
//     channels (WaitClosed).
package boardtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// Options are what a test asks of a board it opens; each zero value means
// the board's default.
type Options struct {
	Lease      time.Duration
	Renew      time.Duration
	SafetyPoll time.Duration
	PageSize   int
	// Clock is the board's clock (a *ManualClock, shared by every Board a
	// test opens on one board); nil means the board's default.
	Clock actions.Clock
}

// An Opener opens a board at location ("" for a new, empty board; else the
// Location of a board the test opened before, to open a second Board on the
// same storage) with the options o. The board is closed when the test ends;
// a test may close it earlier (Close may be called more than once).
type Opener func(t *testing.T, location string, o Options) actions.Board

// Run runs the contract suite, each test as a subtest, on boards open
// makes.
func Run(t *testing.T, open Opener) { run(t, open, false) }

// RunParallel is Run with the subtests in parallel (open must be safe for
// concurrent use), but for those in alone, which run first, by themselves:
// for boards that share nothing but what a test gives them, as the file
// board's files. The PostgreSQL board's databases share a server, and its
// Head reads the server's snapshot horizon, which other databases'
// transactions hold back, so its suite runs serially.
func RunParallel(t *testing.T, open Opener) { run(t, open, true) }

func run(t *testing.T, open Opener, parallel bool) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if parallel && !alone[c.name] {
				t.Parallel()
			}
			c.fn(t, open)
		})
	}
}

// alone are the cases that run by themselves: they bound tightly how long
// a call takes, which other tests running at once on a small machine
// would make flaky.
var alone = map[string]bool{"Depart": true}

type testCase struct {
	name string
	fn   func(t *testing.T, open Opener)
}

var cases = []testCase{
	{"PostListGet", testPostListGet},
	{"ListPages", testListPages},
	{"ListPageBoundedByBytes", testListPageBoundedByBytes},
	{"ListFiltered", testListFiltered},
	{"PostRefusals", testPostRefusals},
	{"FinishReleaseRefusals", testFinishReleaseRefusals},
	{"BadCursors", testBadCursors},
	{"NextTimesOut", testNextTimesOut},
	{"NextOldestFirstAndAddressing", testNextOldestFirstAndAddressing},
	{"NextRefusesNonIdentity", testNextRefusesNonIdentity},
	{"NextCancelledWhileWaiting", testNextCancelledWhileWaiting},
	{"Depart", testDepart},
	{"RejoinAfterDepart", testRejoinAfterDepart},
	{"Members", testMembers},
	{"MembersDropsDeadProcesses", testMembersDropsDeadProcesses},
	{"RenewalsKeepClaimUntilClose", testRenewalsKeepClaimUntilClose},
	{"CloseAfterDepart", testCloseAfterDepart},
	{"Changes", testChanges},
	{"ChangesPagesSplitOneChange", testChangesPagesSplitOneChange},
	{"ChangesSeeOtherBoardsClaims", testChangesSeeOtherBoardsClaims},
	{"WakeAcrossBoards", testWakeAcrossBoards},
	{"FailAndCancel", testFailAndCancel},
	{"CancelRefusals", testCancelRefusals},
	{"Readdress", testReaddress},
	{"PostToIdentityNotLive", testPostToIdentityNotLive},
	{"AwaitWakesOnEnd", testAwaitWakesOnEnd},
	{"AwaitUnknownAndTimeout", testAwaitUnknownAndTimeout},
	{"NoticeOutcomeThenWork", testNoticeOutcomeThenWork},
	{"NoticeSkipsAndOnlyOneHears", testNoticeSkipsAndOnlyOneHears},
	{"SetWaiter", testSetWaiter},
	{"EndingTransitions", testEndingTransitions},
	{"PostToIdentityThatIsNotLive", testPostToIdentityThatIsNotLive},
	{"NoticeOutcomes", testNoticeOutcomes},
	{"NoticeClaimsForOneWaiter", testNoticeClaimsForOneWaiter},
	{"ExpiredLeaseReaddresses", testExpiredLeaseReaddresses},
	{"EndedEveryView", testEndedEveryView},
}

// Mint returns a new identity of agent name.
func Mint(tb testing.TB, name string) identity.ID {
	tb.Helper()
	id, err := identity.Mint(name)
	require.NoError(tb, err)
	return id
}

func post(t *testing.T, b actions.Board, from identity.ID, to, title string) actions.Record {
	t.Helper()
	rec, err := b.Post(t.Context(), actions.Agent(from), actions.Draft{To: to, Title: title, Body: "body of " + title})
	require.NoError(t, err)
	return rec
}

// next claims with a short timeout (a bound) and requires one record.
func next(t *testing.T, b actions.Board, who identity.ID) actions.Record {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", testtime.Bound(5*time.Second))
	require.NoError(t, err)
	require.Len(t, p.Records, 1, "%s expected an action", who)
	return p.Records[0]
}

// nothingFor requires that who finds nothing to claim right now.
func nothingFor(t *testing.T, b actions.Board, who identity.ID) {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records, "%s should find nothing", who)
}

func join(t *testing.T, b actions.Board, who identity.ID) {
	t.Helper()
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
}

func testPostListGet(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	require.Equal(t, "board", b.Name())
	alice := identity.ID("user:alice")
	a := post(t, b, alice, "", "first")
	bb := post(t, b, alice, "worker", "second")
	require.Equal(t, "a-1", a.ID)
	require.Equal(t, "a-2", bb.ID)
	require.Equal(t, actions.Open, a.State)
	require.Equal(t, "worker", bb.To)
	require.Equal(t, "user:alice", a.From)

	p, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, p.Records, 2)
	require.Equal(t, "first", p.Records[0].Title)
	require.Equal(t, "body of first", p.Records[0].Body)

	p2, err := b.List(t.Context(), p.Cursor)
	require.NoError(t, err)
	require.NotNil(t, p2.Records)
	require.Empty(t, p2.Records)
	require.Equal(t, p.Cursor, p2.Cursor)

	c := post(t, b, alice, "", "third")
	p3, err := b.List(t.Context(), p2.Cursor)
	require.NoError(t, err)
	require.Len(t, p3.Records, 1)
	require.Equal(t, c.ID, p3.Records[0].ID)

	got, err := b.Get(t.Context(), bb.ID)
	require.NoError(t, err)
	require.Equal(t, bb, got)

	// A second Board on the same storage sees the same actions, and takes
	// the first one's cursors.
	other := open(t, b.Location(), Options{})
	p4, err := other.List(t.Context(), p.Cursor)
	require.NoError(t, err)
	require.Len(t, p4.Records, 1)
	require.Equal(t, c.ID, p4.Records[0].ID)
}

func testListPages(t *testing.T, open Opener) {
	b := open(t, "", Options{PageSize: 3})
	for i := range 7 {
		post(t, b, "user:alice", "", "n"+string(rune('a'+i)))
	}
	var seen []string
	cursor := actions.Cursor("")
	for {
		p, err := b.List(t.Context(), cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Records), 3)
		if len(p.Records) == 0 {
			break
		}
		for _, r := range p.Records {
			seen = append(seen, r.ID)
		}
		cursor = p.Cursor
	}
	require.Equal(t, []string{"a-1", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7"}, seen)
}

func testListPageBoundedByBytes(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	body := strings.Repeat("x", 60<<10)
	for range 20 {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "big", Body: body})
		require.NoError(t, err)
	}
	p, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.NotEmpty(t, p.Records)
	require.Less(t, len(p.Records), 20, "a page stops near 1 MiB of text")
	n := len(p.Records)
	for len(p.Records) > 0 {
		p, err = b.List(t.Context(), p.Cursor)
		require.NoError(t, err)
		n += len(p.Records)
	}
	require.Equal(t, 20, n, "paging reaches every action")
}

func testListFiltered(t *testing.T, open Opener) {
	b := open(t, "", Options{PageSize: 2})
	ctx := t.Context()
	w := Mint(t, "w")
	join(t, b, w)
	// a-1 done, a-2 open, a-3 failed, a-4 claimed, a-5..a-7 done, a-8 cancelled, a-9 open.
	for i := range 9 {
		post(t, b, "user:alice", "", fmt.Sprintf("n%d", i+1))
	}
	take := func(id string) {
		t.Helper()
		p, err := b.Next(ctx, w, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		require.Equal(t, id, p.Records[0].ID)
	}
	take("a-1")
	_, err := b.Finish(ctx, w, "a-1", "")
	require.NoError(t, err)
	_, err = b.Cancel(ctx, "user:alice", "a-2", "")
	require.NoError(t, err)
	_, err = b.Cancel(ctx, "user:alice", "a-8", "")
	require.NoError(t, err)
	take("a-3")
	_, err = b.Fail(ctx, w, "a-3", "no")
	require.NoError(t, err)
	take("a-4")
	for _, id := range []string{"a-5", "a-6", "a-7"} {
		take(id)
		_, err = b.Finish(ctx, w, id, "")
		require.NoError(t, err)
	}

	all := func(f actions.ListFilter) []string {
		t.Helper()
		var ids []string
		cursor := actions.Cursor("")
		for {
			p, err := b.ListFiltered(ctx, cursor, f)
			require.NoError(t, err)
			require.LessOrEqual(t, len(p.Records), 2)
			if len(p.Records) == 0 {
				require.Equal(t, cursor, p.Cursor, "an empty page stays where it was")
				return ids
			}
			for _, r := range p.Records {
				require.True(t, len(f.States) == 0 || slices.Contains(f.States, r.State), "%s is %s", r.ID, r.State)
				ids = append(ids, r.ID)
			}
			cursor = p.Cursor
		}
	}
	require.Equal(t, []string{"a-4", "a-9"}, all(actions.ListFilter{States: []actions.State{actions.Open, actions.Claimed}}))
	require.Equal(t, []string{"a-2", "a-8"}, all(actions.ListFilter{States: []actions.State{actions.Cancelled}}))
	require.Equal(t, []string{"a-1", "a-2", "a-3", "a-5", "a-6", "a-7", "a-8"},
		all(actions.ListFilter{States: []actions.State{actions.Done, actions.Failed, actions.Cancelled}}))
	require.Len(t, all(actions.ListFilter{}), 9, "the zero filter keeps every action")

	// A filtered listing's cursor is List's: it pages on in either.
	p, err := b.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{actions.Claimed}})
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	l, err := b.List(ctx, p.Cursor)
	require.NoError(t, err)
	require.Equal(t, "a-5", l.Records[0].ID)

	_, err = b.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{"finished"}})
	require.ErrorContains(t, err, `unknown state "finished"`)
	_, err = b.ListFiltered(ctx, "bogus", actions.ListFilter{States: []actions.State{actions.Open}})
	require.ErrorIs(t, err, actions.ErrBadCursor)
}

func testPostRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	who := Mint(t, "poster")

	_, err := b.Post(ctx, actions.Agent(who), actions.Draft{Title: "  \t\n ", Body: "body"})
	require.ErrorIs(t, err, actions.ErrEmptyTitle)

	_, err = b.Post(ctx, actions.Agent(who), actions.Draft{Title: strings.Repeat("x", actions.MaxTitleLen+1)})
	require.ErrorIs(t, err, actions.ErrTooLong)
	require.ErrorContains(t, err, "title")
	_, err = b.Post(ctx, actions.Agent(who), actions.Draft{Title: strings.Repeat("é", actions.MaxTitleLen)}) // characters, not bytes
	require.NoError(t, err)

	_, err = b.Post(ctx, actions.Agent(who), actions.Draft{Title: "two\nlines"})
	require.ErrorIs(t, err, actions.ErrBadText)
	_, err = b.Post(ctx, actions.Agent(who), actions.Draft{Title: "bad", Body: "\xff\xfe"})
	require.ErrorIs(t, err, actions.ErrBadText)

	_, err = b.Post(ctx, actions.Agent(who), actions.Draft{Title: "big", Body: strings.Repeat("x", actions.MaxBodyLen+1)})
	require.ErrorIs(t, err, actions.ErrTooLong)
	require.ErrorContains(t, err, "body")

	for _, to := range []string{"has space", "agent:x#zz", "agent:", "#12345678", "-lead"} {
		_, err = b.Post(ctx, actions.Agent(who), actions.Draft{To: to, Title: "t"})
		require.ErrorIs(t, err, actions.ErrBadRecipient, "to %q", to)
		require.ErrorContains(t, err, to)
	}
	for _, from := range []identity.ID{"", "alice", "user:", "user:has space", "agent:x"} {
		_, err = b.Post(ctx, actions.Agent(from), actions.Draft{Title: "t"})
		require.ErrorIs(t, err, actions.ErrBadPoster, "from %q", from)
	}

	// Nothing refused was posted.
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
}

func testFinishReleaseRefusals(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	x := identity.ID("agent:x#12345678")
	y := identity.ID("agent:y#87654321")

	for _, id := range []string{"a-99", "x", "", "a-0", "a-07", "a--1"} {
		_, err := b.Finish(ctx, x, id, "")
		require.ErrorIs(t, err, actions.ErrUnknownAction, "id %q", id)
		_, err = b.Release(ctx, x, id)
		require.ErrorIs(t, err, actions.ErrUnknownAction, "id %q", id)
		_, err = b.Get(ctx, id)
		require.ErrorIs(t, err, actions.ErrUnknownAction, "id %q", id)
	}

	a := post(t, b, "user:alice", "", "job")
	_, err := b.Finish(ctx, x, a.ID, "")
	require.ErrorIs(t, err, actions.ErrNotHeld)
	require.ErrorContains(t, err, "action a-1 is open")
	_, err = b.Release(ctx, x, a.ID)
	require.ErrorIs(t, err, actions.ErrNotHeld)

	got := next(t, b, x)
	require.Equal(t, a.ID, got.ID)
	_, err = b.Finish(ctx, y, a.ID, "")
	require.ErrorIs(t, err, actions.ErrNotHeld)
	require.ErrorContains(t, err, "action a-1 is held by agent:x#12345678, not agent:y#87654321: action not held by this identity")
	_, err = b.Release(ctx, y, a.ID)
	require.ErrorIs(t, err, actions.ErrNotHeld)
	require.ErrorContains(t, err, "held by agent:x#12345678")

	_, err = b.Finish(ctx, x, a.ID, strings.Repeat("r", actions.MaxResultLen+1))
	require.ErrorIs(t, err, actions.ErrTooLong)

	done, err := b.Finish(ctx, x, a.ID, "all good")
	require.NoError(t, err)
	require.Equal(t, actions.Done, done.State)
	require.Equal(t, "all good", done.Result)
	require.Equal(t, string(x), done.Holder)
	require.Equal(t, string(x), done.EndedBy)
	require.NotNil(t, done.EndedAt)
	require.NotNil(t, done.ClaimedAt)

	_, err = b.Finish(ctx, x, a.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "finished by agent:x#12345678")
	_, err = b.Release(ctx, x, a.ID)
	require.ErrorIs(t, err, actions.ErrEnded)
}

func testBadCursors(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	other := open(t, "", Options{})
	ctx := t.Context()
	who := Mint(t, "w")
	otherList, err := other.List(ctx, "")
	require.NoError(t, err)
	otherHead, err := other.Head(ctx)
	require.NoError(t, err)
	head, err := b.Head(ctx)
	require.NoError(t, err)
	list, err := b.List(ctx, "")
	require.NoError(t, err)
	// The board's own cursors, misspelled.
	prefix, _, ok := strings.Cut(string(list.Cursor), ".s")
	require.True(t, ok, "a List cursor looks like <board id>.s<seq>: %q", list.Cursor)

	for _, c := range []actions.Cursor{actions.StartCursor, "garbage", otherList.Cursor, head,
		actions.Cursor(prefix + ".s-1"), actions.Cursor(prefix + ".s01")} {
		_, err := b.List(ctx, c)
		require.ErrorIs(t, err, actions.ErrBadCursor, "list %q", c)
		_, err = b.Next(ctx, who, c, time.Millisecond)
		require.ErrorIs(t, err, actions.ErrBadCursor, "next %q", c)
	}
	for _, c := range []actions.Cursor{actions.StartCursor, "garbage", list.Cursor, otherHead, actions.Cursor(prefix + ".r1.x")} {
		_, err := b.Changes(ctx, c, time.Millisecond)
		require.ErrorIs(t, err, actions.ErrBadCursor, "changes %q", c)
	}
}

func testNextTimesOut(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	who := Mint(t, "idle")
	start := time.Now()
	p, err := b.Next(t.Context(), who, "", 100*time.Millisecond)
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records)
	require.GreaterOrEqual(t, elapsed, 100*time.Millisecond)
	require.Less(t, elapsed, testtime.Bound(2*time.Second))

	// The cursor is good for the next call, and for List.
	post(t, b, "user:alice", "", "later")
	p2, err := b.Next(t.Context(), who, p.Cursor, time.Second)
	require.NoError(t, err)
	require.Len(t, p2.Records, 1)
	l, err := b.List(t.Context(), p.Cursor)
	require.NoError(t, err)
	require.Len(t, l.Records, 1)
}

func testNextOldestFirstAndAddressing(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	alice := identity.ID("user:alice")
	w1 := Mint(t, "worker")
	w2 := Mint(t, "worker")
	other := Mint(t, "other")
	// Only a live identity can be posted to.
	join(t, b, w1)

	forW1 := post(t, b, alice, string(w1), "for w1 exactly")
	forWorkers := post(t, b, alice, "worker", "for any worker")
	forOther := post(t, b, alice, "other", "for other")
	forAnyone := post(t, b, alice, "", "for anyone")

	// w2 skips what is addressed to w1 exactly.
	require.Equal(t, forWorkers.ID, next(t, b, w2).ID)
	require.Equal(t, forAnyone.ID, next(t, b, w2).ID)
	nothingFor(t, b, w2)
	require.Equal(t, forW1.ID, next(t, b, w1).ID)
	nothingFor(t, b, w1)
	got := next(t, b, other)
	require.Equal(t, forOther.ID, got.ID)
	require.Equal(t, actions.Claimed, got.State)
	require.Equal(t, string(other), got.Holder)

	// A released action goes back to its place in the order, before newer
	// ones, even for a caller whose cursor is past it.
	newer := post(t, b, alice, "", "newer")
	p, err := b.Next(t.Context(), w1, "", 0)
	require.NoError(t, err)
	require.Equal(t, newer.ID, p.Records[0].ID)
	_, err = b.Release(t.Context(), w1, newer.ID)
	require.NoError(t, err)
	_, err = b.Release(t.Context(), other, forOther.ID)
	require.NoError(t, err)
	p2, err := b.Next(t.Context(), other, p.Cursor, time.Second)
	require.NoError(t, err)
	require.Equal(t, forOther.ID, p2.Records[0].ID)
}

func testNextRefusesNonIdentity(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	_, err := b.Next(t.Context(), "user:alice", "", time.Millisecond)
	require.ErrorIs(t, err, identity.ErrBadID)
}

func testNextCancelledWhileWaiting(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	who := Mint(t, "w")
	go func() {
		_, err := b.Next(ctx, who, "", time.Minute)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testtime.Bound(5 * time.Second)):
		t.Fatal("Next did not return after its context was cancelled")
	}
	// Nothing was claimed: a post now is there for someone else.
	a := post(t, b, "user:alice", "", "job")
	require.Equal(t, a.ID, next(t, b, Mint(t, "other")).ID)
}

func testDepart(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	alice := identity.ID("user:alice")
	old := Mint(t, "cleartest")
	join(t, b, old)

	held1 := post(t, b, alice, "", "held one")
	held2 := post(t, b, alice, string(old), "held two, addressed to old")
	waiting := post(t, b, alice, string(old), "waiting for old")
	elsewhere := post(t, b, alice, "someone-else", "not ours")
	require.Equal(t, held1.ID, next(t, b, old).ID)
	require.Equal(t, held2.ID, next(t, b, old).ID)

	start := time.Now()
	require.NoError(t, b.Depart(ctx, old))
	took := time.Since(start)
	t.Logf("Depart giving back 2 claims and re-addressing 2 actions took %v", took)
	require.Less(t, took, testtime.Bound(100*time.Millisecond), "the bridge has ~100 ms between SIGINT and SIGTERM")

	for _, id := range []string{held1.ID, held2.ID} {
		r, err := b.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, actions.Open, r.State, id)
		require.Empty(t, r.Holder, id)
	}
	for _, id := range []string{held2.ID, waiting.ID} {
		r, err := b.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "cleartest", r.To, "%s is re-addressed to the agent name", id)
	}
	r, err := b.Get(ctx, elsewhere.ID)
	require.NoError(t, err)
	require.Equal(t, "someone-else", r.To)

	// The old identity is refused; its successor of the same agent takes
	// everything, in order; another agent takes only what is for anyone.
	_, err = b.Next(ctx, old, "", 0)
	require.ErrorIs(t, err, actions.ErrDeparted)
	stranger := Mint(t, "stranger")
	require.Equal(t, held1.ID, next(t, b, stranger).ID)
	nothingFor(t, b, stranger)
	successor := Mint(t, "cleartest")
	join(t, b, successor)
	require.Equal(t, held2.ID, next(t, b, successor).ID)
	require.Equal(t, waiting.ID, next(t, b, successor).ID)

	// Idempotent, and a Depart for an identity that never joined is fine.
	require.NoError(t, b.Depart(ctx, old))
	require.NoError(t, b.Depart(ctx, Mint(t, "never")))

	members, err := b.Members(ctx)
	require.NoError(t, err)
	var ids []identity.ID
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	require.NotContains(t, ids, old)
	require.Contains(t, ids, successor)
}

func testRejoinAfterDepart(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	who := Mint(t, "w")
	require.NoError(t, b.Depart(t.Context(), who))
	join(t, b, who)
	post(t, b, "user:alice", "", "job")
	next(t, b, who)
}

func testMembers(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	w := Mint(t, "w")
	// A member's process must run, or the board departs it at once.
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess-1"}))
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess-2", Client: "codex"}), "Join is idempotent")
	a := post(t, b, "user:alice", "", "one")
	c := post(t, b, "user:alice", "", "two")
	next(t, b, w)
	next(t, b, w)

	ms, err := b.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	m := ms[0]
	require.Equal(t, w, m.ID)
	require.Equal(t, "w", m.Agent)
	require.Equal(t, os.Getpid(), m.PID)
	require.Equal(t, 4241, m.ClaudePID)
	require.Equal(t, "sess-2", m.SessionID)
	require.Equal(t, "codex", m.Client)
	require.Equal(t, []string{a.ID, c.ID}, m.Holding)
	require.True(t, m.LeaseUntil.After(time.Now()))

	require.ErrorIs(t, b.Join(ctx, actions.Member{ID: "nope"}), identity.ErrBadID)
}

// A member of this machine whose process is gone is not live.
func testMembersDropsDeadProcesses(t *testing.T, open Opener) {
	b := open(t, "", Options{Lease: 300 * time.Millisecond, Renew: 100 * time.Millisecond})
	pid := deadPID(t)
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: Mint(t, "gone"), PID: pid}))
	require.Eventually(t, func() bool {
		ms, err := b.Members(t.Context())
		return err == nil && len(ms) == 0
	}, testtime.Bound(5*time.Second), 20*time.Millisecond)
}

// Renewals keep a claim for as long as its holder's Board is open, lease
// after lease. Once that Board closes without departing, the claim stays
// held until the last renewal's lease runs out, to the millisecond, and a
// waiter sleeping on that lease wakes for it then. Time is a manual clock:
// nothing sleeps through a lease.
func testRenewalsKeepClaimUntilClose(t *testing.T, open Opener) {
	const lease, renew = 3 * time.Second, time.Second
	clock := NewManualClock()
	// The safety poll is far away: only the lease's end can wake the heir.
	opts := Options{Lease: lease, Renew: renew, SafetyPoll: time.Hour, Clock: clock}
	first := open(t, "", opts)
	second := open(t, first.Location(), opts)

	holder := Mint(t, "holder")
	join(t, first, holder)
	a := post(t, second, "user:alice", "", "job")
	require.Equal(t, a.ID, next(t, first, holder).ID)

	// Each tick renews the lease to a full lease from then; four leases
	// pass, and nobody else can take the claim at any tick. (Each thief is
	// new: a member's own renewals on the other Board are not what this
	// test waits for, and may fall behind the clock.)
	for range 4 * lease / renew {
		clock.Advance(renew)
		renewedAt(t, second, holder, clock.Now().Add(lease))
		nothingFor(t, second, Mint(t, "thief"))
	}

	// Close ends renewal without departing; the lease then runs out.
	require.NoError(t, first.Close())
	require.NoError(t, first.Close(), "Close is idempotent")
	end := leaseUntil(t, second, holder)
	require.WithinDuration(t, clock.Now().Add(lease), end, 0)

	heir := Mint(t, "heir")
	join(t, second, heir)
	armed := clock.Pending()
	got := make(chan actions.Page, 1)
	go func() {
		defer close(got)
		p, err := second.Next(t.Context(), heir, "", 10*time.Second)
		if err == nil {
			got <- p
		}
	}()
	clock.BlockUntil(t, armed+1) // the heir sleeps until the lease's end

	clock.Advance(end.Sub(clock.Now()) - time.Millisecond)
	nothingFor(t, second, Mint(t, "thief")) // a millisecond before its end the lease holds
	select {
	case p := <-got:
		t.Fatalf("the heir's Next returned %v before the lease ran out", p.Records)
	default:
	}
	clock.Advance(2 * time.Millisecond)
	p, ok := <-got
	require.True(t, ok, "the heir's Next failed")
	require.Len(t, p.Records, 1, "woken by the lease's end, not the safety poll")
	require.Equal(t, a.ID, p.Records[0].ID)
	require.Equal(t, string(heir), p.Records[0].Holder)
}

// leaseUntil returns the end of who's lease, as the board lists it.
func leaseUntil(t *testing.T, b actions.Board, who identity.ID) time.Time {
	t.Helper()
	ms, err := b.Members(t.Context())
	require.NoError(t, err)
	for _, m := range ms {
		if m.ID == who {
			return m.LeaseUntil
		}
	}
	t.Fatalf("%s is not a live member", who)
	return time.Time{}
}

// renewedAt waits until who's lease, as b lists it, runs to end: a renewal
// (on another Board, in another goroutine) has written it.
func renewedAt(t *testing.T, b actions.Board, who identity.ID, end time.Time) {
	t.Helper()
	var last time.Time
	require.Eventually(t, func() bool {
		ms, err := b.Members(t.Context())
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.ID == who {
				last = m.LeaseUntil
			}
		}
		return !last.Before(end)
	}, testtime.Bound(10*time.Second), time.Millisecond, "a renewal extends %s's lease to %v", who, end)
	require.WithinDuration(t, end, last, 0, "renewed to a lease from the tick, not further")
}

func testCloseAfterDepart(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	who := Mint(t, "w")
	join(t, b, who)
	require.NoError(t, b.Depart(t.Context(), who))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "late"})
	require.ErrorIs(t, err, actions.ErrClosed)
	_, err = b.Next(t.Context(), who, "", time.Second)
	require.ErrorIs(t, err, actions.ErrClosed)
}

func testChanges(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	early := post(t, b, "user:alice", "", "early")

	// From the start, Changes reports what exists.
	p, err := b.Changes(ctx, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, early.ID, p.Records[0].ID)

	head, err := b.Head(ctx)
	require.NoError(t, err)
	p, err = b.Changes(ctx, head, 50*time.Millisecond)
	require.NoError(t, err)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records)
	require.Equal(t, head, p.Cursor)

	// A change made while waiting ends the wait.
	w := Mint(t, "w")
	got := make(chan actions.Page, 1)
	go func() {
		p, err := b.Changes(ctx, head, 10*time.Second)
		if err == nil {
			got <- p
		}
		close(got)
	}()
	claimed := next(t, b, w)
	p = <-got
	require.Len(t, p.Records, 1)
	require.Equal(t, claimed.ID, p.Records[0].ID)
	require.Equal(t, actions.Claimed, p.Records[0].State)

	// Each change once, latest state.
	_, err = b.Finish(ctx, w, claimed.ID, "ok")
	require.NoError(t, err)
	late := post(t, b, "user:alice", "", "late")
	var recs []actions.Record
	cursor := p.Cursor
	for len(recs) < 2 {
		p, err = b.Changes(ctx, cursor, 2*time.Second)
		require.NoError(t, err)
		require.NotEmpty(t, p.Records, "changes after %v", recs)
		recs = append(recs, p.Records...)
		cursor = p.Cursor
	}
	require.Len(t, recs, 2)
	require.Equal(t, actions.Done, recs[0].State)
	require.Equal(t, late.ID, recs[1].ID)
}

func testChangesPagesSplitOneChange(t *testing.T, open Opener) {
	b := open(t, "", Options{PageSize: 2})
	ctx := t.Context()
	w := Mint(t, "w")
	for range 5 {
		post(t, b, "user:alice", "", "job")
	}
	for range 5 {
		next(t, b, w)
	}
	head, err := b.Head(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Depart(ctx, w)) // one change (one rev) to five actions
	var seen []string
	cursor := head
	for len(seen) < 5 {
		p, err := b.Changes(ctx, cursor, 2*time.Second)
		require.NoError(t, err)
		require.NotEmpty(t, p.Records, "after %v", seen)
		require.LessOrEqual(t, len(p.Records), 2)
		for _, r := range p.Records {
			seen = append(seen, r.ID)
		}
		cursor = p.Cursor
	}
	require.Equal(t, []string{"a-1", "a-2", "a-3", "a-4", "a-5"}, seen)
	p, err := b.Changes(ctx, cursor, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, p.Records)
}

func testChangesSeeOtherBoardsClaims(t *testing.T, open Opener) {
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	watcher := open(t, "", Options{SafetyPoll: testtime.Bound(10 * time.Second)})
	worker := open(t, watcher.Location(), Options{})
	a := post(t, worker, "user:alice", "", "job")
	head, err := watcher.Head(t.Context())
	require.NoError(t, err)

	// Once a Board runs Changes, claims elsewhere wake it too.
	p, err := watcher.Changes(t.Context(), head, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, p.Records)
	got := make(chan actions.Page, 1)
	go func() {
		p, err := watcher.Changes(t.Context(), head, testtime.Bound(8*time.Second))
		if err == nil {
			got <- p
		}
		close(got)
	}()
	start := time.Now()
	w := Mint(t, "w")
	require.Equal(t, a.ID, next(t, worker, w).ID)
	p = <-got
	require.Len(t, p.Records, 1)
	require.Equal(t, actions.Claimed, p.Records[0].State)
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "woken by the board's notification, not the 10 s safety poll")
}

// A post on one Board wakes a Next waiting on another Board of the same
// storage long before the safety poll.
func testWakeAcrossBoards(t *testing.T, open Opener) {
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	waiter := open(t, "", Options{SafetyPoll: testtime.Bound(30 * time.Second)})
	poster := open(t, waiter.Location(), Options{})
	who := Mint(t, "w")
	for i := range 3 {
		type result struct {
			p   actions.Page
			err error
		}
		ch := make(chan result, 1)
		go func() {
			p, err := waiter.Next(t.Context(), who, "", testtime.Bound(20*time.Second))
			ch <- result{p, err}
		}()
		// Give the waiter a moment to be asleep; either way it must find
		// the post well before the safety poll.
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		a := post(t, poster, "user:alice", "", "wake me")
		r := <-ch
		require.NoError(t, r.err)
		require.Len(t, r.p.Records, 1)
		require.Equal(t, a.ID, r.p.Records[0].ID)
		t.Logf("round %d: woken %v after the post began", i, time.Since(start))
		require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "woken by the notifier, not the 30 s safety poll")
	}
}
