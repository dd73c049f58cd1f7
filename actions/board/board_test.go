package board

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
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
	rec, err := b.Post(t.Context(), actions.Agent(from), actions.Draft{To: to, Title: title, Body: "body of " + title})
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
	t.Parallel()
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
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	rec, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "kept"})
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "soon lost"})
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
	t.Parallel()
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
	t.Parallel()
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

func TestBoard_NextCancelledAtClaimGivesBack(t *testing.T) {
	t.Parallel()
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

func TestBoard_CloseEndsWaiters(t *testing.T) {
	t.Parallel()
	hook, sleeping := sleepSignal()
	b, err := Open(filepath.Join(t.TempDir(), "board.db"), &Options{beforeSleep: hook})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Next(t.Context(), mint(t, "w"), "", time.Minute)
		errc <- err
	}()
	<-sleeping
	require.NoError(t, b.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, actions.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return when the board closed")
	}
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
	t.Parallel()
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
	t.Parallel()
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
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
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
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{BusyTimeout: 200 * time.Millisecond})
	other := openTest(t, path, nil)
	// flock(2) locks belong to an open file description, so the other
	// Board's lock file excludes this one's even in one process.
	release, err := other.lock.acquire(t.Context())
	require.NoError(t, err)

	start := time.Now()
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), path)
	require.Less(t, time.Since(start), 2*time.Second)

	// A waiter that gave up leaves its place in the queue to a helper that
	// gives the lock back once granted; the next writer gets it.
	release()
	post(t, b, "user:alice", "", "after")
}

// An identity draining a queue claims without looking first, yet a claim
// whose lease has run out still goes back, and is taken (being oldest),
// before the next claim.
func TestBoard_DrainingClaimerReclaimsFirst(t *testing.T) {
	t.Parallel()
	const lease = 400 * time.Millisecond
	path := filepath.Join(t.TempDir(), "board.db")
	clock := boardtest.NewManualClock()
	b := openTest(t, path, &Options{Lease: lease, Clock: clock})
	gone, err := Open(path, &Options{Lease: lease, Clock: clock})
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
		clock.Advance(25 * time.Millisecond) // pace the drain across the lease's end
	}
	t.Fatalf("%s was never reclaimed", first.ID)
}

func TestOpen_NewBoardIsPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Post(t.Context(), "user:me", actions.Draft{Title: "a title", Body: "a body"})
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
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	const renew = 300 * time.Millisecond
	clock := boardtest.NewManualClock()
	opts := &Options{Lease: time.Second, Renew: renew, Clock: clock}
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
	// tick lets one renewal interval pass; the renewal loop arms its next
	// timer before it renews (or not).
	tick := func() {
		t.Helper()
		clock.BlockUntil(t, 1)
		clock.Advance(renew)
		clock.BlockUntil(t, 1)
	}
	// renewedNow waits until the lease has been renewed at the clock's now.
	renewedNow := func() {
		t.Helper()
		want := clock.Now().Add(time.Second).Truncate(time.Millisecond)
		require.Eventually(t, func() bool {
			ms, err := other.Members(t.Context())
			return err == nil && len(ms) == 1 && !ms[0].LeaseUntil.Before(want)
		}, 10*time.Second, time.Millisecond, "renewed at %v", clock.Now())
	}
	joined := lease()
	for range 4 {
		tick()
	}
	require.Equal(t, joined, lease(), "no renewal while holding nothing")
	require.True(t, joined.Before(clock.Now()), "the lease has run out")

	// Claiming refreshes the lease: at least Lease-Renew to run.
	a := post(t, other, "user:alice", "", "job")
	require.Equal(t, a.ID, next(t, b, w).ID)
	require.Greater(t, lease().Sub(clock.Now()), 500*time.Millisecond, "the claim refreshed the lease")
	// Renewals keep the claim past two leases.
	for range 8 {
		tick()
		renewedNow() // at each tick while holding
	}
	nothingFor(t, other, mint(t, "thief"))

	// Once it is finished, renewals stop again.
	_, err := b.Finish(t.Context(), w, a.ID, "")
	require.NoError(t, err)
	settled := lease()
	for range 4 {
		tick()
	}
	require.Equal(t, settled, lease(), "no renewal once the claim was finished")
	require.True(t, settled.Before(clock.Now()), "the lease has run out again")
}
