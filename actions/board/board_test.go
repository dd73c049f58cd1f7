package board

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// openTest opens a board in a fresh directory (or at path, when given) and
// closes it when the test ends.
func openTest(t *testing.T, path string, opts *Options) *Board {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "sub", "board.db")
	}
	b, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func mint(tb testing.TB, name string) identity.ID {
	tb.Helper()
	id, err := identity.Mint(name)
	require.NoError(tb, err)
	return id
}

func post(t *testing.T, b *Board, from identity.ID, to, title string) actions.Record {
	t.Helper()
	rec, err := b.Post(t.Context(), from, to, title, "body of "+title)
	require.NoError(t, err)
	return rec
}

// next claims with a short timeout and requires one record.
func next(t *testing.T, b *Board, who identity.ID) actions.Record {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", 2*time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1, "%s expected an action", who)
	return p.Records[0]
}

// nothingFor requires that who finds nothing to claim right now.
func nothingFor(t *testing.T, b *Board, who identity.ID) {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records, "%s should find nothing", who)
}

func TestOpen_CreatesBoard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deep", "er")
	path := filepath.Join(dir, "board.db")
	b := openTest(t, path, nil)
	require.Equal(t, path, b.Path())
	require.Equal(t, "board", b.Name())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, p := range []string{path, path + "-lock", path + "-notify", path + "-watching"} {
		_, err := os.Stat(p)
		require.NoError(t, err, p)
	}
	var mode string
	require.NoError(t, b.db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
	var fk int
	require.NoError(t, b.db.QueryRow("PRAGMA foreign_keys").Scan(&fk))
	require.Equal(t, 1, fk)
	var v int
	require.NoError(t, b.db.QueryRow("PRAGMA user_version").Scan(&v))
	require.Equal(t, schemaVersion, v)
}

func TestOpen_ReopenKeepsActions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	rec, err := b.Post(t.Context(), "user:alice", "", "kept", "")
	require.NoError(t, err)
	p1, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b2 := openTest(t, path, nil)
	got, err := b2.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, "kept", got.Title)
	// The board id survives, so cursors do too.
	p2, err := b2.List(t.Context(), p1.Cursor)
	require.NoError(t, err)
	require.Empty(t, p2.Records)
}

func TestOpen_NewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	_, err = b.db.Exec("PRAGMA user_version = 99")
	require.NoError(t, err)
	require.NoError(t, b.Close())

	_, err = Open(path, nil)
	require.ErrorIs(t, err, ErrNewerSchema)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "upgrade bee")
}

func TestOpen_GarbageRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	garbage := []byte("this is not a database, but someone's notes\n")
	require.NoError(t, os.WriteFile(path, garbage, 0o600))

	_, err := Open(path, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "move it aside")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, garbage, got, "the file must be left as it was")
}

func TestOpen_DamagedRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	_, err = b.Post(t.Context(), "user:alice", "", "soon lost", "")
	require.NoError(t, err)
	_, err = b.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	require.NoError(t, b.Close())

	// Keep SQLite's header, wreck the schema page that follows it.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(strings.Repeat("\xff", 3000)), 100)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, err = Open(path, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), path)
}

func TestOpen_ForeignDatabaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE recipes (name TEXT)")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = Open(path, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "not a bee board")
	require.Contains(t, err.Error(), path)
}

func TestOpen_BadOptions(t *testing.T) {
	for _, renew := range []time.Duration{2 * time.Second, 600 * time.Millisecond} {
		_, err := Open(filepath.Join(t.TempDir(), "b.db"), &Options{Lease: time.Second, Renew: renew})
		require.ErrorContains(t, err, "at most half the lease", "renew %v", renew)
	}
	ok, err := Open(filepath.Join(t.TempDir(), "b.db"), &Options{Lease: time.Second, Renew: 500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, ok.Close())
	_, err = Open("", nil)
	require.Error(t, err)
}

func TestDefaultPath(t *testing.T) {
	t.Setenv(EnvPath, "/tmp/elsewhere.db")
	p, err := DefaultPath()
	require.NoError(t, err)
	require.Equal(t, "/tmp/elsewhere.db", p)

	t.Setenv(EnvPath, "")
	t.Setenv("HOME", "/home/someone")
	p, err = DefaultPath()
	require.NoError(t, err)
	require.Equal(t, "/home/someone/.bee/board.db", p)
}

func TestBoard_PostListGet(t *testing.T) {
	b := openTest(t, "", nil)
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
}

func TestBoard_ListPages(t *testing.T) {
	b := openTest(t, "", &Options{PageSize: 3})
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

func TestBoard_PostRefusals(t *testing.T) {
	b := openTest(t, "", nil)
	ctx := t.Context()
	who := mint(t, "poster")

	_, err := b.Post(ctx, who, "", "  \t\n ", "body")
	require.ErrorIs(t, err, actions.ErrEmptyTitle)

	_, err = b.Post(ctx, who, "", strings.Repeat("x", MaxTitleLen+1), "")
	require.ErrorIs(t, err, ErrTooLong)
	require.ErrorContains(t, err, "title")
	_, err = b.Post(ctx, who, "", strings.Repeat("é", MaxTitleLen), "") // characters, not bytes
	require.NoError(t, err)

	_, err = b.Post(ctx, who, "", "two\nlines", "")
	require.ErrorIs(t, err, ErrBadText)

	_, err = b.Post(ctx, who, "", "big", strings.Repeat("x", MaxBodyLen+1))
	require.ErrorIs(t, err, ErrTooLong)
	require.ErrorContains(t, err, "body")

	for _, to := range []string{"has space", "agent:x#zz", "agent:", "#12345678", "-lead"} {
		_, err = b.Post(ctx, who, to, "t", "")
		require.ErrorIs(t, err, ErrBadRecipient, "to %q", to)
		require.ErrorContains(t, err, to)
	}
	for _, from := range []identity.ID{"", "alice", "user:", "user:has space", "agent:x"} {
		_, err = b.Post(ctx, from, "", "t", "")
		require.ErrorIs(t, err, ErrBadPoster, "from %q", from)
	}

	// Nothing refused was posted.
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
}

func TestBoard_FinishReleaseRefusals(t *testing.T) {
	b := openTest(t, "", nil)
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

	_, err = b.Finish(ctx, x, a.ID, strings.Repeat("r", MaxResultLen+1))
	require.ErrorIs(t, err, ErrTooLong)

	done, err := b.Finish(ctx, x, a.ID, "all good")
	require.NoError(t, err)
	require.Equal(t, actions.Done, done.State)
	require.Equal(t, "all good", done.Result)
	require.Equal(t, string(x), done.Holder)
	require.NotNil(t, done.EndedAt)
	require.NotNil(t, done.ClaimedAt)

	_, err = b.Finish(ctx, x, a.ID, "")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "finished by agent:x#12345678")
	_, err = b.Release(ctx, x, a.ID)
	require.ErrorIs(t, err, actions.ErrEnded)
}

func TestBoard_BadCursors(t *testing.T) {
	b := openTest(t, "", nil)
	other := openTest(t, "", nil)
	ctx := t.Context()
	who := mint(t, "w")
	otherList, err := other.List(ctx, "")
	require.NoError(t, err)
	head, err := b.Head(ctx)
	require.NoError(t, err)
	list, err := b.List(ctx, "")
	require.NoError(t, err)

	for _, c := range []actions.Cursor{actions.StartCursor, "garbage", otherList.Cursor, head, actions.Cursor(b.id + ".s-1"), actions.Cursor(b.id + ".s01")} {
		_, err := b.List(ctx, c)
		require.ErrorIs(t, err, actions.ErrBadCursor, "list %q", c)
		_, err = b.Next(ctx, who, c, time.Millisecond)
		require.ErrorIs(t, err, actions.ErrBadCursor, "next %q", c)
	}
	for _, c := range []actions.Cursor{actions.StartCursor, "garbage", list.Cursor, actions.Cursor(b.id + ".r1.x")} {
		_, err := b.Changes(ctx, c, time.Millisecond)
		require.ErrorIs(t, err, actions.ErrBadCursor, "wait %q", c)
	}
}

func TestBoard_NextTimesOut(t *testing.T) {
	b := openTest(t, "", nil)
	who := mint(t, "idle")
	start := time.Now()
	p, err := b.Next(t.Context(), who, "", 100*time.Millisecond)
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records)
	require.GreaterOrEqual(t, elapsed, 100*time.Millisecond)
	require.Less(t, elapsed, 2*time.Second)

	// The cursor is good for the next call, and for List.
	post(t, b, "user:alice", "", "later")
	p2, err := b.Next(t.Context(), who, p.Cursor, time.Second)
	require.NoError(t, err)
	require.Len(t, p2.Records, 1)
	l, err := b.List(t.Context(), p.Cursor)
	require.NoError(t, err)
	require.Len(t, l.Records, 1)
}

func TestBoard_NextOldestFirstAndAddressing(t *testing.T) {
	b := openTest(t, "", nil)
	alice := identity.ID("user:alice")
	w1 := mint(t, "worker")
	w2 := mint(t, "worker")
	other := mint(t, "other")
	// Only a live identity can be posted to.
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: w1, PID: os.Getpid()}))

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

	// A released action goes back to its place in the order, before newer ones,
	// even for a caller whose cursor is past it.
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

func TestBoard_NextRefusesNonIdentity(t *testing.T) {
	b := openTest(t, "", nil)
	_, err := b.Next(t.Context(), "user:alice", "", time.Millisecond)
	require.ErrorIs(t, err, identity.ErrBadID)
}

func TestBoard_NextCancelledWhileWaiting(t *testing.T) {
	b := openTest(t, "", nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Next(ctx, mint(t, "w"), "", time.Minute)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after its context was cancelled")
	}
}

func TestBoard_NextCancelledAtClaimGivesBack(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var claimed actions.Record
	b := openTest(t, "", &Options{afterClaim: func(r actions.Record) {
		claimed = r
		cancel() // the caller goes away the moment the claim commits
	}})
	who := mint(t, "w")
	a := post(t, b, "user:alice", "", "job")

	p, err := b.Next(ctx, who, "", time.Second)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, p.Records)
	require.Equal(t, a.ID, claimed.ID, "the claim did commit")

	got, err := b.Get(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State, "the claim was given back")
	require.Empty(t, got.Holder)
}

func TestBoard_Depart(t *testing.T) {
	b := openTest(t, "", nil)
	ctx := t.Context()
	alice := identity.ID("user:alice")
	old := mint(t, "cleartest")
	require.NoError(t, b.Join(ctx, actions.Member{ID: old, PID: os.Getpid()}))

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
	require.Less(t, took, 100*time.Millisecond, "the bridge has ~100 ms between SIGINT and SIGTERM")

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
	require.ErrorIs(t, err, ErrDeparted)
	stranger := mint(t, "stranger")
	require.Equal(t, held1.ID, next(t, b, stranger).ID)
	nothingFor(t, b, stranger)
	successor := mint(t, "cleartest")
	require.NoError(t, b.Join(ctx, actions.Member{ID: successor, PID: os.Getpid()}))
	require.Equal(t, held2.ID, next(t, b, successor).ID)
	require.Equal(t, waiting.ID, next(t, b, successor).ID)

	// Idempotent, and a Depart for an identity that never joined is fine.
	require.NoError(t, b.Depart(ctx, old))
	require.NoError(t, b.Depart(ctx, mint(t, "never")))

	members, err := b.Members(ctx)
	require.NoError(t, err)
	var ids []identity.ID
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	require.NotContains(t, ids, old)
	require.Contains(t, ids, successor)
}

func TestBoard_RejoinAfterDepart(t *testing.T) {
	b := openTest(t, "", nil)
	who := mint(t, "w")
	require.NoError(t, b.Depart(t.Context(), who))
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	post(t, b, "user:alice", "", "job")
	next(t, b, who)
}

func TestBoard_Members(t *testing.T) {
	b := openTest(t, "", nil)
	ctx := t.Context()
	w := mint(t, "w")
	// A member's process must run, or the board departs it at once.
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess-1"}))
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess-2"}), "Join is idempotent")
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
	require.Equal(t, []string{a.ID, c.ID}, m.Holding)
	require.True(t, m.LeaseUntil.After(time.Now()))

	require.ErrorIs(t, b.Join(ctx, actions.Member{ID: "nope"}), identity.ErrBadID)
}

func TestBoard_CloseKeepsClaimsUntilLeaseRunsOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	opts := &Options{Lease: 300 * time.Millisecond}
	first, err := Open(path, opts)
	require.NoError(t, err)
	second := openTest(t, path, opts)

	holder := mint(t, "holder")
	require.NoError(t, first.Join(t.Context(), actions.Member{ID: holder, PID: os.Getpid()}))
	a := post(t, second, "user:alice", "", "job")
	require.Equal(t, a.ID, next(t, first, holder).ID)

	// Renewals keep the claim for several leases.
	time.Sleep(700 * time.Millisecond) // lets the lease be renewed twice; no event to wait for
	nothingFor(t, second, mint(t, "thief"))

	// Close ends renewal without departing; the lease then runs out.
	require.NoError(t, first.Close())
	require.NoError(t, first.Close(), "Close is idempotent")
	start := time.Now()
	p, err := second.Next(t.Context(), mint(t, "heir"), "", 5*time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, a.ID, p.Records[0].ID)
	t.Logf("claim reclaimed %v after the holder's board closed", time.Since(start))
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestBoard_CloseAfterDepart(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "board.db"), nil)
	require.NoError(t, err)
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who}))
	require.NoError(t, b.Depart(t.Context(), who))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	_, err = b.Post(t.Context(), "user:alice", "", "late", "")
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.Next(t.Context(), who, "", time.Second)
	require.ErrorIs(t, err, ErrClosed)
}

func TestBoard_CloseEndsWaiters(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "board.db"), nil)
	require.NoError(t, err)
	sleeping := make(chan struct{}, 1)
	b.opts.beforeSleep = func() {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := b.Next(t.Context(), mint(t, "w"), "", time.Minute)
		errc <- err
	}()
	<-sleeping
	require.NoError(t, b.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return when the board closed")
	}
}

func TestBoard_Wait(t *testing.T) {
	b := openTest(t, "", nil)
	ctx := t.Context()
	early := post(t, b, "user:alice", "", "early")

	// From the start, Wait reports what exists.
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
	w := mint(t, "w")
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
	p, err = b.Changes(ctx, p.Cursor, time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 2)
	require.Equal(t, actions.Done, p.Records[0].State)
	require.Equal(t, late.ID, p.Records[1].ID)
}

func TestBoard_WaitPagesSplitOneChange(t *testing.T) {
	b := openTest(t, "", &Options{PageSize: 2})
	ctx := t.Context()
	w := mint(t, "w")
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
	for {
		p, err := b.Changes(ctx, cursor, 10*time.Millisecond)
		require.NoError(t, err)
		if len(p.Records) == 0 {
			break
		}
		for _, r := range p.Records {
			seen = append(seen, r.ID)
		}
		cursor = p.Cursor
	}
	require.Equal(t, []string{"a-1", "a-2", "a-3", "a-4", "a-5"}, seen)
}

// sleepSignal returns a beforeSleep hook and the channel it signals on.
func sleepSignal() (func(), chan struct{}) {
	ch := make(chan struct{}, 1)
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}, ch
}

func TestBoard_WakeAcrossBoards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	hook, sleeping := sleepSignal()
	waiter := openTest(t, path, &Options{SafetyPoll: 10 * time.Second, beforeSleep: hook})
	poster := openTest(t, path, nil)
	who := mint(t, "w")

	type result struct {
		p   actions.Page
		err error
	}
	wait := func() chan result {
		ch := make(chan result, 1)
		go func() {
			p, err := waiter.Next(t.Context(), who, "", 8*time.Second)
			ch <- result{p, err}
		}()
		return ch
	}
	check := func(name string, ch chan result) {
		t.Helper()
		<-sleeping
		start := time.Now()
		a := post(t, poster, "user:alice", "", name)
		r := <-ch
		require.NoError(t, r.err)
		require.Len(t, r.p.Records, 1, name)
		require.Equal(t, a.ID, r.p.Records[0].ID)
		t.Logf("%s: woke %v after the post began", name, time.Since(start))
		require.Less(t, time.Since(start), 2*time.Second, "%s: woken by the notifier, not the 10 s safety poll", name)
	}

	check("plain", wait())

	// The wake file replaced by another (rename over it).
	notify := path + "-notify"
	require.NoError(t, os.WriteFile(filepath.Join(notify, "new"), []byte("x"), 0o600))
	require.NoError(t, os.Rename(filepath.Join(notify, "new"), filepath.Join(notify, wakeFile)))
	check("file replaced", wait())

	// The wake file deleted.
	require.NoError(t, os.Remove(filepath.Join(notify, wakeFile)))
	check("file deleted", wait())

	// The whole directory deleted: the watcher makes it again.
	ch := wait()
	<-sleeping
	require.NoError(t, os.RemoveAll(notify))
	// The removal itself wakes the waiter (a touch may have been missed);
	// it finds nothing and sleeps again.
	<-sleeping
	start := time.Now()
	a := post(t, poster, "user:alice", "", "dir removed")
	r := <-ch
	require.NoError(t, r.err)
	require.Len(t, r.p.Records, 1)
	require.Equal(t, a.ID, r.p.Records[0].ID)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestBoard_LockedBeyondBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{BusyTimeout: 200 * time.Millisecond})
	a := post(t, b, "user:alice", "", "job")

	// Another writer that ignores bee's lock file holds SQLite's write lock.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	require.NoError(t, err)

	start := time.Now()
	_, err = b.Post(t.Context(), "user:alice", "", "blocked", "")
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), path)
	require.Less(t, time.Since(start), 2*time.Second)

	// Next returns within its timeout even so, with nothing claimed, though
	// its busy timeout is far longer.
	patient := openTest(t, path, &Options{BusyTimeout: time.Minute})
	start = time.Now()
	p, err := patient.Next(t.Context(), mint(t, "w"), "", 300*time.Millisecond)
	took := time.Since(start)
	require.NoError(t, err)
	require.Empty(t, p.Records)
	t.Logf("Next with a 300ms timeout on a locked board returned after %v", took)
	require.Less(t, took, 2*time.Second)

	_, err = conn.ExecContext(t.Context(), "ROLLBACK")
	require.NoError(t, err)
	got := next(t, b, mint(t, "w"))
	require.Equal(t, a.ID, got.ID)
}

func TestBoard_LockFileHeldElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{BusyTimeout: 200 * time.Millisecond})
	other := openTest(t, path, nil)
	// flock(2) locks belong to an open file description, so the other
	// Board's lock file excludes this one's even in one process.
	release, err := other.lock.acquire(t.Context())
	require.NoError(t, err)

	start := time.Now()
	_, err = b.Post(t.Context(), "user:alice", "", "blocked", "")
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), path)
	require.Less(t, time.Since(start), 2*time.Second)

	// A waiter that gave up leaves its place in the queue to a helper that
	// gives the lock back once granted; the next writer gets it.
	release()
	post(t, b, "user:alice", "", "after")
}

func TestBoard_WaitSeesOtherBoardsClaims(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	watcher := openTest(t, path, &Options{SafetyPoll: 10 * time.Second})
	worker := openTest(t, path, nil)
	a := post(t, worker, "user:alice", "", "job")
	head, err := watcher.Head(t.Context())
	require.NoError(t, err)

	// Once a Board runs Wait, claims and finishes elsewhere wake it too.
	p, err := watcher.Changes(t.Context(), head, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, p.Records)
	got := make(chan actions.Page, 1)
	go func() {
		p, err := watcher.Changes(t.Context(), head, 8*time.Second)
		if err == nil {
			got <- p
		}
		close(got)
	}()
	start := time.Now()
	w := mint(t, "w")
	require.Equal(t, a.ID, next(t, worker, w).ID)
	p = <-got
	require.Len(t, p.Records, 1)
	require.Equal(t, actions.Claimed, p.Records[0].State)
	require.Less(t, time.Since(start), 2*time.Second, "woken by the change file, not the 10 s safety poll")
}

func TestBoard_ListPageBoundedByBytes(t *testing.T) {
	b := openTest(t, "", nil)
	body := strings.Repeat("x", 60<<10)
	for range 20 {
		_, err := b.Post(t.Context(), "user:alice", "", "big", body)
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

// An identity draining a queue claims without looking first, yet a claim
// whose lease has run out still goes back, and is taken (being oldest),
// before the next claim.
func TestBoard_DrainingClaimerReclaimsFirst(t *testing.T) {
	const lease = 400 * time.Millisecond
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{Lease: lease})
	gone, err := Open(path, &Options{Lease: lease})
	require.NoError(t, err)
	holder := mint(t, "holder")
	first := post(t, b, "user:alice", "", "first")
	require.Equal(t, first.ID, next(t, gone, holder).ID)
	require.NoError(t, gone.Close()) // no Depart: the lease runs out
	var leaseEnd int64
	require.NoError(t, b.db.QueryRow(`SELECT lease_until FROM members WHERE identity = ?`, string(holder)).Scan(&leaseEnd))
	for range 40 {
		post(t, b, "user:alice", "", "later")
	}

	w := mint(t, "drainer")
	for range 40 {
		p, err := b.Next(t.Context(), w, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		claimedAt := p.Records[0].ClaimedAt.UnixMilli()
		if p.Records[0].ID == first.ID {
			t.Logf("reclaimed %dms after the lease ran out", claimedAt-leaseEnd)
			return
		}
		require.LessOrEqual(t, claimedAt, leaseEnd, "claimed %s after the lease of %s ran out, before reclaiming it", p.Records[0].ID, first.ID)
		time.Sleep(25 * time.Millisecond) // pace the drain across the lease's end
	}
	t.Fatalf("%s was never reclaimed", first.ID)
}

func TestOpen_NewBoardIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Post(t.Context(), "user:me", "", "a title", "a body")
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		require.NoError(t, err, p)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

// A lease guards claims only: an idle member does not renew it (an idle
// bridge costs no CPU), stays listed while its process runs, and its next
// claim refreshes the lease to outlast the wait for the next renewal, which
// renewals then keep.
func TestBoard_IdleMemberRenewsOnlyWhileHolding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	opts := &Options{Lease: time.Second, Renew: 300 * time.Millisecond}
	b := openTest(t, path, opts)
	other := openTest(t, path, opts)
	w := mint(t, "idle")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: w, PID: os.Getpid()}))
	lease := func() time.Time {
		t.Helper()
		ms, err := other.Members(t.Context())
		require.NoError(t, err)
		require.Len(t, ms, 1, "the idle member is listed while its process runs")
		return ms[0].LeaseUntil
	}
	joined := lease()
	time.Sleep(1200 * time.Millisecond) // several renewal intervals; no event to wait for
	require.Equal(t, joined, lease(), "no renewal while holding nothing")
	require.True(t, joined.Before(time.Now()), "the lease has run out")

	// Claiming refreshes the lease: at least Lease-Renew to run.
	a := post(t, other, "user:alice", "", "job")
	require.Equal(t, a.ID, next(t, b, w).ID)
	require.Greater(t, time.Until(lease()), 500*time.Millisecond, "the claim refreshed the lease")
	// Renewals keep the claim past two leases.
	time.Sleep(2200 * time.Millisecond)
	nothingFor(t, other, mint(t, "thief"))
	require.True(t, lease().After(time.Now()), "renewed while holding")

	// Once it is finished, renewals stop again.
	_, err := b.Finish(t.Context(), w, a.ID, "")
	require.NoError(t, err)
	var settled time.Time
	require.Eventually(t, func() bool {
		l := lease()
		same := l.Equal(settled)
		settled = l
		return same
	}, 5*time.Second, 400*time.Millisecond, "renewals go on after the claim was finished")
}

// A member whose lease has run out and whose process is gone is not live.
func TestBoard_MembersDropsDeadProcesses(t *testing.T) {
	b := openTest(t, "", &Options{Lease: 100 * time.Millisecond, Renew: 50 * time.Millisecond})
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: mint(t, "gone"), PID: dead.Process.Pid}))
	require.Eventually(t, func() bool {
		ms, err := b.Members(t.Context())
		return err == nil && len(ms) == 0
	}, 5*time.Second, 20*time.Millisecond)
}
