package boardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// The contract of reservations (issue 18), on every board.

func init() {
	cases = append(cases,
		testCase{"ReserveGrantsAndLists", testReserveGrantsAndLists},
		testCase{"ReserveRefusalNamesHolder", testReserveRefusalNamesHolder},
		testCase{"ReserveSharedAndExclusive", testReserveSharedAndExclusive},
		testCase{"ReserveAllOrNothing", testReserveAllOrNothing},
		testCase{"ReserveHolderNeverConflictsWithItself", testReserveHolderNeverConflictsWithItself},
		testCase{"ReservePatternsRefused", testReservePatternsRefused},
		testCase{"ReserveForAction", testReserveForAction},
		testCase{"ReleasePaths", testReleasePaths},
		testCase{"ReservationsEndWithDepart", testReservationsEndWithDepart},
		testCase{"ReservationsEndWithClear", testReservationsEndWithClear},
		testCase{"ReservationsOfKilledProcess", testReservationsOfKilledProcess},
		testCase{"ReservationsEndWithLease", testReservationsEndWithLease},
		testCase{"PersonReservation", testPersonReservation},
		testCase{"Conflicts", testConflicts},
		testCase{"ActionPathsReservedByClaim", testActionPathsReservedByClaim},
		testCase{"ActionHeldBackThenClaimed", testActionHeldBackThenClaimed},
		testCase{"ActionHeldBackAcrossProcesses", testActionHeldBackAcrossProcesses},
		testCase{"ActionPathsRefused", testActionPathsRefused},
	)
	sharedRoles["reserver"] = roleReserver
}

// The repositories the cases reserve in.
const (
	repoA = "github.com/tractat-us/bee"
	repoB = "example.com/other/repo"
)

func reserve(t *testing.T, b actions.Board, who actions.Poster, repo string, patterns ...string) actions.Reservation {
	t.Helper()
	r, err := b.Reserve(t.Context(), who, actions.ReserveRequest{Repo: repo, Patterns: patterns, Reason: "work on " + patterns[0]})
	require.NoError(t, err)
	return r
}

// refused requires that err refuses a reservation because of the
// reservations ids (in that order), and returns the refusal.
func refused(t *testing.T, err error, ids ...string) *actions.ReservedError {
	t.Helper()
	require.ErrorIs(t, err, actions.ErrReserved)
	var re *actions.ReservedError
	require.ErrorAs(t, err, &re)
	var got []string
	for _, c := range re.Conflicts {
		got = append(got, c.ID)
	}
	require.Equal(t, ids, got)
	return re
}

func reservations(t *testing.T, b actions.Board, repo string) []actions.Reservation {
	t.Helper()
	rs, err := b.Reservations(t.Context(), repo)
	require.NoError(t, err)
	require.NotNil(t, rs)
	return rs
}

func ids(rs []actions.Reservation) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// A reservation is granted with an id, its patterns normalised, and is
// listed per repository, oldest first.
func testReserveGrantsAndLists(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a := joinLive(t, b, "a")
	before := time.Now().Add(-time.Minute)
	r1, err := b.Reserve(t.Context(), actions.Agent(a), actions.ReserveRequest{Repo: repoA,
		Patterns: []string{"./src/auth/", "docs/*.md", "src/auth"}, Reason: "  rework the login "})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(r1.ID, actions.ReservationPrefix), r1.ID)
	require.Equal(t, repoA, r1.Repo)
	require.Equal(t, string(a), r1.Holder)
	require.Equal(t, []string{"src/auth", "docs/*.md"}, r1.Patterns)
	require.True(t, r1.Exclusive)
	require.Equal(t, "rework the login", r1.Reason)
	require.Empty(t, r1.Action)
	require.True(t, r1.Since.After(before), "since %v", r1.Since)
	r2 := reserve(t, b, actions.Agent(a), repoB, "README.md")
	require.NotEqual(t, r1.ID, r2.ID)

	require.Equal(t, []actions.Reservation{r1}, reservations(t, b, repoA))
	require.Equal(t, []string{r2.ID}, ids(reservations(t, b, repoB)))
	require.Equal(t, []string{r1.ID, r2.ID}, ids(reservations(t, b, "")))
	require.Empty(t, reservations(t, b, "example.com/nothing/here"))
}

// A refusal names each conflicting holder, its patterns, reason, age and
// action.
func testReserveRefusalNamesHolder(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c, x := joinLive(t, b, "a"), joinLive(t, b, "c"), joinLive(t, b, "x")
	// Two shared reservations that overlap each other, both in the way of
	// an exclusive one.
	ra, err := b.Reserve(t.Context(), actions.Agent(a), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/auth/**"},
		Reason: "work on src/auth/**", Shared: true})
	require.NoError(t, err)
	rc, err := b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/*/login.go", "docs"},
		Shared: true})
	require.NoError(t, err)

	_, err = b.Reserve(t.Context(), actions.Agent(x), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/auth/login.go"}})
	re := refused(t, err, ra.ID, rc.ID)
	require.Equal(t, repoA, re.Repo)
	require.Equal(t, string(a), re.Conflicts[0].Holder)
	require.Equal(t, []string{"src/auth/**"}, re.Conflicts[0].Patterns)
	require.Equal(t, []string{"src/*/login.go"}, re.Conflicts[1].Patterns, "only the patterns in the way")
	for _, want := range []string{string(a), "src/auth/**", `"work on src/auth/**"`, string(c), "src/*/login.go", "ago"} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "docs", "a pattern not in the way is not named")
	require.Empty(t, mine(reservations(t, b, repoA), x), "nothing was granted")
}

func mine(rs []actions.Reservation, who identity.ID) []actions.Reservation {
	var out []actions.Reservation
	for _, r := range rs {
		if r.Holder == string(who) {
			out = append(out, r)
		}
	}
	return out
}

// Shared reservations overlap each other; an exclusive one overlaps
// nothing of another's. Other repositories and disjoint paths never
// conflict.
func testReserveSharedAndExclusive(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	shared := func(who identity.ID, p string) (actions.Reservation, error) {
		return b.Reserve(t.Context(), actions.Agent(who), actions.ReserveRequest{Repo: repoA, Patterns: []string{p}, Shared: true})
	}
	ra, err := shared(a, "vendor/**")
	require.NoError(t, err)
	require.False(t, ra.Exclusive)
	_, err = shared(c, "vendor/lib")
	require.NoError(t, err, "shared beside shared")
	_, err = b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"vendor/lib/x.go"}})
	refused(t, err, ra.ID)

	rx := reserve(t, b, actions.Agent(a), repoA, "src/**/*.go")
	_, err = shared(c, "src/main.go")
	refused(t, err, rx.ID)
	_, err = shared(c, "README.md")
	require.NoError(t, err, "a pattern that cannot match what src/**/*.go matches")
	reserve(t, b, actions.Agent(c), repoB, "src/**/*.go")
	reserve(t, b, actions.Agent(c), repoA, "srcs/main.go")
}

// A reservation is granted whole or not at all.
func testReserveAllOrNothing(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	ra := reserve(t, b, actions.Agent(a), repoA, "Makefile")
	_, err := b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"docs/**", "Makefile", "cmd"}})
	refused(t, err, ra.ID)
	require.Empty(t, mine(reservations(t, b, ""), c))
	reserve(t, b, actions.Agent(c), repoA, "docs/**", "cmd")
}

// A holder never conflicts with itself, exclusive or not.
func testReserveHolderNeverConflictsWithItself(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a := joinLive(t, b, "a")
	r1 := reserve(t, b, actions.Agent(a), repoA, "src/**")
	r2 := reserve(t, b, actions.Agent(a), repoA, "src/auth/login.go")
	require.Equal(t, []string{r1.ID, r2.ID}, ids(reservations(t, b, repoA)))
	rs, err := b.Conflicts(t.Context(), actions.Agent(a), repoA, []string{"src/auth/login.go"})
	require.NoError(t, err)
	require.Empty(t, rs)
}

// Patterns and requests a board refuses, naming what is wrong.
func testReservePatternsRefused(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a := joinLive(t, b, "a")
	try := func(r actions.ReserveRequest) error {
		_, err := b.Reserve(t.Context(), actions.Agent(a), r)
		return err
	}
	long := strings.Repeat("x/", 300)
	for _, p := range []string{"../x", "/etc/passwd", "", long, "src//x", "a**b"} {
		err := try(actions.ReserveRequest{Repo: repoA, Patterns: []string{"ok/path", p}})
		require.ErrorIs(t, err, actions.ErrBadPattern, "pattern %q", p)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", p))
	}
	many := make([]string, actions.MaxPatterns+1)
	for i := range many {
		many[i] = fmt.Sprintf("dir%d", i)
	}
	require.ErrorIs(t, try(actions.ReserveRequest{Repo: repoA, Patterns: many}), actions.ErrBadPattern)
	require.ErrorIs(t, try(actions.ReserveRequest{Repo: repoA}), actions.ErrBadPattern)
	require.ErrorIs(t, try(actions.ReserveRequest{Patterns: []string{"x"}}), actions.ErrBadRepo)
	require.ErrorIs(t, try(actions.ReserveRequest{Repo: repoA, Patterns: []string{"x"}, Reason: "two\nlines"}), actions.ErrBadText)
	require.ErrorIs(t, try(actions.ReserveRequest{Repo: repoA, Patterns: []string{"x"}, Reason: strings.Repeat("r", actions.MaxReasonLen+1)}),
		actions.ErrTooLong)
	_, err := b.Reserve(t.Context(), "nobody", actions.ReserveRequest{Repo: repoA, Patterns: []string{"x"}})
	require.ErrorIs(t, err, actions.ErrBadPoster)
	_, err = b.Reserve(t.Context(), actions.Agent(Mint(t, "never")), actions.ReserveRequest{Repo: repoA, Patterns: []string{"x"}})
	require.ErrorIs(t, err, actions.ErrNotLive, "an identity that never joined")
	require.NoError(t, b.Depart(t.Context(), a))
	require.ErrorIs(t, try(actions.ReserveRequest{Repo: repoA, Patterns: []string{"x"}}), actions.ErrDeparted)
	require.Empty(t, reservations(t, b, ""))
}

// A reservation may serve an action its holder holds, and ends with it.
func testReserveForAction(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	job := post(t, b, "user:alice", "", "job")
	other := post(t, b, "user:alice", string(c), "other")
	require.Equal(t, job.ID, next(t, b, a).ID)
	forJob := func(who identity.ID, id string) error {
		_, err := b.Reserve(t.Context(), actions.Agent(who), actions.ReserveRequest{Repo: repoA, Patterns: []string{"lib"}, Action: id})
		return err
	}
	require.ErrorIs(t, forJob(c, job.ID), actions.ErrNotHeld, "held by another")
	require.ErrorIs(t, forJob(a, other.ID), actions.ErrNotHeld, "open")
	require.ErrorIs(t, forJob(a, "a-999999"), actions.ErrUnknownAction)
	_, err := b.Reserve(t.Context(), "user:alice", actions.ReserveRequest{Repo: repoA, Patterns: []string{"lib"}, Action: job.ID})
	require.ErrorIs(t, err, actions.ErrNotHeld, "a person holds no action")
	require.NoError(t, forJob(a, job.ID))
	rs := reservations(t, b, repoA)
	require.Len(t, rs, 1)
	require.Equal(t, job.ID, rs[0].Action)
	reserve(t, b, actions.Agent(a), repoA, "kept")
	_, err = b.Finish(t.Context(), a, job.ID, "")
	require.NoError(t, err)
	rs = reservations(t, b, repoA)
	require.Len(t, rs, 1, "the reservation serving the action ended with it; the other stays")
	require.Equal(t, []string{"kept"}, rs[0].Patterns)
	require.ErrorIs(t, forJob(a, job.ID), actions.ErrEnded)
}

// ReleasePaths drops some patterns, all of a repository's, or all.
func testReleasePaths(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	r1 := reserve(t, b, actions.Agent(a), repoA, "src/**", "docs", "Makefile")
	reserve(t, b, actions.Agent(a), repoB, "x")
	rc := reserve(t, b, actions.Agent(c), repoA, "cmd")

	got, err := b.ReleasePaths(t.Context(), actions.Agent(a), repoA, []string{"./docs/", "not/held"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, r1.ID, got[0].ID)
	require.Equal(t, []string{"docs"}, got[0].Patterns)
	reserve(t, b, actions.Agent(c), repoA, "docs/x.md")
	_, err = b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/x"}})
	refused(t, err, r1.ID)

	got, err = b.ReleasePaths(t.Context(), actions.Agent(a), repoA, nil)
	require.NoError(t, err)
	require.Equal(t, []string{r1.ID}, ids(got))
	require.ElementsMatch(t, []string{"src/**", "Makefile"}, got[0].Patterns)
	require.Len(t, mine(reservations(t, b, ""), a), 1, "repo B's stays")

	got, err = b.ReleasePaths(t.Context(), actions.Agent(a), "", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, mine(reservations(t, b, ""), a))
	require.Contains(t, ids(reservations(t, b, repoA)), rc.ID, "another's stays")
	got, err = b.ReleasePaths(t.Context(), actions.Agent(a), "", nil)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Empty(t, got)
	_, err = b.ReleasePaths(t.Context(), actions.Agent(a), repoA, []string{"../x"})
	require.ErrorIs(t, err, actions.ErrBadPattern)
}

// An identity's reservations end as it departs.
func testReservationsEndWithDepart(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	reserve(t, b, actions.Agent(a), repoA, "src/**")
	reserve(t, b, actions.Agent(a), repoB, "docs")
	rc := reserve(t, b, actions.Agent(c), repoA, "cmd")
	require.NoError(t, b.Depart(t.Context(), a))
	require.Equal(t, []string{rc.ID}, ids(reservations(t, b, "")))
	reserve(t, b, actions.Agent(c), repoA, "src/main.go")
}

// /clear: the bridge joins a new identity of the same agent and departs
// the old one; the old one's reservations end, the new one holds nothing.
func testReservationsEndWithClear(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	old, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	reserve(t, b, actions.Agent(old), repoA, "src/auth/**")
	fresh := joinLive(t, b, "a")
	require.NoError(t, b.Depart(t.Context(), old))
	require.Empty(t, reservations(t, b, repoA))
	reserve(t, b, actions.Agent(c), repoA, "src/auth/login.go")
	_, err := b.Reserve(t.Context(), actions.Agent(fresh), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/auth/**"}})
	require.ErrorIs(t, err, actions.ErrReserved, "the new identity inherits nothing")
}

// A bridge SIGKILLed while holding reservations holds nothing at the next
// look by anyone: its reservations go with it, as its claims do.
func testReservationsOfKilledProcess(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	c := joinLive(t, b, "c")
	p := StartProc(t, "reserver", b.Location())
	who := strings.Fields(p.Expect("ready ", 20*time.Second))[1]
	p.Send("reserve " + repoA + " src/auth/**")
	p.Expect("reserved ", 10*time.Second)
	_, err := b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/auth/x.go"}})
	re := refused(t, err, reservations(t, b, repoA)[0].ID)
	require.Equal(t, who, re.Conflicts[0].Holder)

	p.Kill()
	require.Empty(t, reservations(t, b, repoA), "gone at the next look")
	reserve(t, b, actions.Agent(c), repoA, "src/auth/x.go")
}

// A holder whose lease runs out (its process not seen to die: its pid is
// 1) loses its reservations with its claim, to the millisecond.
func testReservationsEndWithLease(t *testing.T, open Opener) {
	const lease = 3 * time.Second
	clock := NewManualClock()
	opts := Options{Lease: lease, Clock: clock}
	a := open(t, "", opts)
	stale := Mint(t, "stale")
	require.NoError(t, a.Join(t.Context(), actions.Member{ID: stale, PID: 1}))
	job, err := a.Post(t.Context(), "user:alice", actions.Draft{Title: "job", Repo: repoA, Paths: []string{"src/**"}})
	require.NoError(t, err)
	require.Equal(t, job.ID, next(t, a, stale).ID)
	reserve(t, a, actions.Agent(stale), repoA, "docs")
	end := leaseUntil(t, a, stale)
	require.NoError(t, a.Close()) // no departure: the lease is all that is left

	b := open(t, a.Location(), opts)
	heir := joinLive(t, b, "heir")
	clock.Advance(end.Sub(clock.Now()) - time.Millisecond)
	require.Len(t, reservations(t, b, repoA), 2)
	nothingFor(t, b, heir)

	clock.Advance(time.Millisecond)
	require.Equal(t, job.ID, next(t, b, heir).ID, "reclaimed once the lease ran out")
	rs := reservations(t, b, repoA)
	require.Len(t, rs, 1, "stale's are gone; the heir holds the job's paths")
	require.Equal(t, string(heir), rs[0].Holder)
	require.Equal(t, job.ID, rs[0].Action)
	reserve(t, b, "user:alice", repoA, "docs")
}

// A person's reservation lives until released, and stands in the way of
// every agent.
func testPersonReservation(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a := joinLive(t, b, "a")
	alice := actions.Poster("user:alice")
	ra := reserve(t, b, alice, repoA, "db/migrations/**")
	require.Equal(t, "user:alice", ra.Holder)
	_, err := b.Reserve(t.Context(), actions.Agent(a), actions.ReserveRequest{Repo: repoA, Patterns: []string{"db/**"}})
	refused(t, err, ra.ID)
	job, err := b.Post(t.Context(), alice, actions.Draft{Title: "migrate", Repo: repoA, Paths: []string{"db/migrations/7.sql"}})
	require.NoError(t, err)
	nothingFor(t, b, a)
	got, err := b.Get(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, []actions.HeldBack{{Reservation: ra.ID, Holder: "user:alice", Pattern: "db/migrations/**"}}, got.HeldBackBy)

	require.NoError(t, b.Depart(t.Context(), a))
	require.Equal(t, []string{ra.ID}, ids(reservations(t, b, repoA)), "no agent's end ends it")
	a2 := joinLive(t, b, "a")
	_, err = b.ReleasePaths(t.Context(), alice, repoA, nil)
	require.NoError(t, err)
	require.Equal(t, job.ID, next(t, b, a2).ID, "free once released")
}

// Conflicts answers the guard: the exclusive reservations of others that
// match a file.
func testConflicts(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c, x := joinLive(t, b, "a"), joinLive(t, b, "c"), joinLive(t, b, "x")
	ra := reserve(t, b, actions.Agent(a), repoA, "src/auth/**", "docs/*.md")
	_, err := b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"vendor"}, Shared: true})
	require.NoError(t, err)
	rp := reserve(t, b, "user:alice", repoA, "db/*.sql")
	reserve(t, b, actions.Agent(x), repoA, "mine.go")
	check := func(paths ...string) []actions.Reservation {
		rs, err := b.Conflicts(t.Context(), actions.Agent(x), repoA, paths)
		require.NoError(t, err)
		require.NotNil(t, rs)
		return rs
	}
	rs := check("src/auth/login.go")
	require.Equal(t, []string{ra.ID}, ids(rs))
	require.Equal(t, []string{"src/auth/**"}, rs[0].Patterns, "only the patterns that match")
	require.Equal(t, string(a), rs[0].Holder)
	require.Equal(t, "work on src/auth/**", rs[0].Reason)
	require.Equal(t, []string{ra.ID, rp.ID}, ids(check("README.md", "docs/x.md", "db/1.sql")))
	require.Empty(t, check("docs/sub/x.md", "src/authz.go", "vendor/lib.go", "mine.go"))
	require.Empty(t, check())
	rs, err = b.Conflicts(t.Context(), actions.Agent(a), repoB, []string{"src/auth/login.go"})
	require.NoError(t, err)
	require.Empty(t, rs, "another repository")

	// A pattern without a literal prefix is found for any path.
	rb := reserve(t, b, "user:alice", repoB, "**/*.sql")
	rs, err = b.Conflicts(t.Context(), actions.Agent(a), repoB, []string{"deep/down/x.sql", "x.go"})
	require.NoError(t, err)
	require.Equal(t, []string{rb.ID}, ids(rs))
}

func postPaths(t *testing.T, b actions.Board, title string, paths ...string) actions.Record {
	t.Helper()
	rec, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: title, Repo: repoA, Paths: paths})
	require.NoError(t, err)
	return rec
}

// Claiming an action that carries paths reserves them for the claimant,
// serving it; its end, or its release, releases them.
func testActionPathsReservedByClaim(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	job := postPaths(t, b, "rework the login", "./src/auth/", "docs/auth.md")
	require.Equal(t, repoA, job.Repo)
	require.Equal(t, []string{"src/auth", "docs/auth.md"}, job.Paths)
	got := next(t, b, a)
	require.Equal(t, job.ID, got.ID)
	require.Equal(t, job.Paths, got.Paths)
	rs := reservations(t, b, repoA)
	require.Len(t, rs, 1)
	require.Equal(t, actions.Reservation{ID: rs[0].ID, Repo: repoA, Holder: string(a), Patterns: job.Paths, Exclusive: true,
		Reason: "rework the login", Action: job.ID, Since: rs[0].Since}, rs[0])
	_, err := b.Reserve(t.Context(), actions.Agent(c), actions.ReserveRequest{Repo: repoA, Patterns: []string{"src/auth/x.go"}})
	refused(t, err, rs[0].ID)

	_, err = b.Release(t.Context(), a, job.ID)
	require.NoError(t, err)
	require.Empty(t, reservations(t, b, repoA), "released with the action")
	require.Equal(t, job.ID, next(t, b, c).ID)
	for _, end := range []func() error{
		func() error { _, err := b.Fail(t.Context(), c, job.ID, "cannot"); return err },
	} {
		require.NoError(t, end())
	}
	require.Empty(t, reservations(t, b, repoA), "ended with the action")
	second := postPaths(t, b, "second", "lib")
	require.Equal(t, second.ID, next(t, b, a).ID)
	_, err = b.Cancel(t.Context(), "user:alice", second.ID, "not needed")
	require.NoError(t, err)
	require.Empty(t, reservations(t, b, repoA), "cancelled with the action")
}

// An open action whose paths another holds is held back: only that
// holder may claim it, views say what holds it, and it is claimed once
// free, by a waiter woken for it.
func testActionHeldBackThenClaimed(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	a, c := joinLive(t, b, "a"), joinLive(t, b, "c")
	ra := reserve(t, b, actions.Agent(a), repoA, "src/**")
	job := postPaths(t, b, "fix the parser", "src/parse/*.go")
	got, err := b.Get(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, []actions.HeldBack{{Reservation: ra.ID, Holder: string(a), Pattern: "src/**"}}, got.HeldBackBy)
	page, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, got.HeldBackBy, page.Records[0].HeldBackBy, "List agrees")
	nothingFor(t, b, c)

	claimed := make(chan actions.Page, 1)
	go func() {
		p, err := b.Next(context.WithoutCancel(t.Context()), c, "", 10*time.Second)
		if err != nil {
			p = actions.Page{}
		}
		claimed <- p
	}()
	time.Sleep(50 * time.Millisecond) // let it wait; it finds nothing meanwhile
	start := time.Now()
	_, err = b.ReleasePaths(t.Context(), actions.Agent(a), repoA, nil)
	require.NoError(t, err)
	p := <-claimed
	require.Len(t, p.Records, 1, "the waiter claims it once free")
	require.Equal(t, job.ID, p.Records[0].ID)
	require.Less(t, time.Since(start), 5*time.Second, "woken, not polled")
	got, err = b.Get(t.Context(), job.ID)
	require.NoError(t, err)
	require.Empty(t, got.HeldBackBy)

	// Held back by one identity: that one may claim it.
	reserve(t, b, actions.Agent(c), repoA, "lib/**")
	mineJob := postPaths(t, b, "lib work", "lib/x")
	nothingFor(t, b, a)
	require.Equal(t, mineJob.ID, next(t, b, c).ID, "its own reservation does not hold it back")
}

// Across processes: an action held back by another process's reservation
// is claimed by this one once that process releases it.
func testActionHeldBackAcrossProcesses(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	c := joinLive(t, b, "c")
	p := StartProc(t, "reserver", b.Location())
	p.Expect("ready ", 20*time.Second)
	p.Send("reserve " + repoA + " src/**")
	p.Expect("reserved ", 10*time.Second)
	job := postPaths(t, b, "job", "src/x.go")
	nothingFor(t, b, c)
	p.Send("release")
	p.Expect("released", 10*time.Second)
	require.Equal(t, job.ID, next(t, b, c).ID)
	p.Finish(10 * time.Second)
}

// The paths of an action are refused as a reservation's are.
func testActionPathsRefused(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "t", Paths: []string{"src"}})
	require.ErrorIs(t, err, actions.ErrBadRepo)
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "t", Repo: repoA, Paths: []string{"src", "/abs"}})
	require.ErrorIs(t, err, actions.ErrBadPattern)
	require.Contains(t, err.Error(), `"/abs"`)
	page, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.Empty(t, page.Records)
}

// roleReserver joins one identity of agent "reserver" and reports "ready
// <identity>"; then per line: "reserve <repo> <pattern>..." reserves
// (exclusive) and reports "reserved <id>", "release" releases all and
// reports "released". Errors are reported as "error <text>". It departs
// when its stdin closes.
func roleReserver(ctx context.Context, b actions.Board, out *Out, cmds <-chan string) error {
	who, err := joinNew(ctx, b, "reserver")
	if err != nil {
		return err
	}
	out.Say("ready %s", who)
	for cmd := range cmds {
		f := strings.Fields(cmd)
		switch {
		case len(f) >= 3 && f[0] == "reserve":
			r, err := b.Reserve(ctx, actions.Agent(who), actions.ReserveRequest{Repo: f[1], Patterns: f[2:], Reason: "role"})
			if err != nil {
				out.Say("error %v", err)
				continue
			}
			out.Say("reserved %s", r.ID)
		case len(f) == 1 && f[0] == "release":
			if _, err := b.ReleasePaths(ctx, actions.Agent(who), "", nil); err != nil {
				out.Say("error %v", err)
				continue
			}
			out.Say("released")
		default:
			return errors.New("unknown command " + cmd)
		}
	}
	return b.Depart(context.WithoutCancel(ctx), who)
}
