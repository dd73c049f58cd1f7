package board

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/testtime"
)

// stopped waits until process pid is stopped.
func stopped(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return procStopped(pid) }, testtime.Bound(10*time.Second), 5*time.Millisecond, "pid %d never stopped", pid)
}

// A process stopped (as by Ctrl-Z) while it holds the write lock: a post
// elsewhere (what `bee post` does: Open, Post, Close) gives up within the
// busy timeout with an error that names the holder, Close does not wait
// for it, and once the holder continues the board works again.
func TestBoard_StoppedLockHolder(t *testing.T) {
	t.Parallel()
	const busy = time.Second
	path := filepath.Join(t.TempDir(), "board.db")
	staller := boardtest.StartProc(t, "staller", path)
	staller.Expect("ready", 30*time.Second)
	staller.Send("post before")
	staller.Expect("posted a-1", 30*time.Second)
	staller.Send("stall held")
	staller.Expect("holding", 30*time.Second)
	pid := staller.Pid()
	stopped(t, pid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	start := time.Now()
	b, err := Open(path, &Options{BusyTimeout: busy})
	require.NoError(t, err)
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
	posted := time.Since(start)
	require.ErrorIs(t, err, ErrLocked)
	var temp interface{ Temporary() bool }
	require.ErrorAs(t, err, &temp)
	require.True(t, temp.Temporary())
	msg := err.Error()
	require.Contains(t, msg, "board "+path+" is locked by pid "+fmt.Sprint(pid))
	require.Contains(t, msg, "stopped")
	require.Regexp(t, `for [0-9.]+m?s`, msg)
	t.Logf("post gave up after %v: %v", posted, err)

	start = time.Now()
	require.NoError(t, b.Close())
	closed := time.Since(start)
	t.Logf("close took %v", closed)
	require.Less(t, posted, testtime.Bound(busy+2*time.Second), "post returns within the busy timeout")
	require.Less(t, closed, testtime.Bound(time.Second), "close does not wait for the stopped holder")

	// A Board that waited while the holder was stopped, and is still open,
	// takes its turn once the holder continues. Its busy timeout is a bound
	// on how long the continued holder takes to let go (it failed at load
	// 20 under -race as a bare 200 ms), so it stretches with the machine.
	b2 := openTest(t, path, &Options{BusyTimeout: testtime.Bound(200 * time.Millisecond)})
	_, err = b2.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	staller.Expect("posted a-2", 30*time.Second)
	rec := post(t, b2, "user:alice", "", "after")
	require.Equal(t, "a-3", rec.ID)
	staller.Finish(30 * time.Second)
}

// Calls that give up one after another while another holder keeps the lock
// share one request queued in the kernel, which hands the lock to the next
// caller once the holder lets go.
func TestBoard_GaveUpCallsShareOneQueuedRequest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{BusyTimeout: 100 * time.Millisecond})
	other := openTest(t, path, nil)
	release, err := other.lock.acquire(t.Context())
	require.NoError(t, err)

	var first *queued
	for i := range 3 {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
		require.ErrorIs(t, err, ErrLocked)
		b.lock.mu.Lock()
		q := b.lock.pending
		b.lock.mu.Unlock()
		require.NotNil(t, q)
		if i == 0 {
			first = q
		}
		require.Same(t, first, q, "one request, however many calls gave up")
		require.False(t, wakeup.Closed(q.done))
	}
	// The message names this process: the other Board's lock file is held
	// here.
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
	require.ErrorContains(t, err, fmt.Sprintf("locked by pid %d", os.Getpid()))

	release()
	// Nobody waits when the kernel grants it, so it goes straight back.
	require.Eventually(t, func() bool { return wakeup.Closed(first.done) }, testtime.Bound(10*time.Second), time.Millisecond)
	post(t, other, "user:alice", "", "other")
	post(t, b, "user:alice", "", "after")
	b.lock.mu.Lock()
	require.Nil(t, b.lock.pending)
	b.lock.mu.Unlock()
}

// A Board closed while its request is queued behind a holder in another
// process closes at once; the request gives the lock straight back when
// granted, so the board is not wedged afterwards.
func TestBoard_CloseWhileQueued(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	holder := openTest(t, path, nil)
	release, err := holder.lock.acquire(t.Context())
	require.NoError(t, err)

	b, err := Open(path, &Options{BusyTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "blocked"})
	require.ErrorIs(t, err, ErrLocked)
	b.lock.mu.Lock()
	q := b.lock.pending
	b.lock.mu.Unlock()
	require.NotNil(t, q)
	start := time.Now()
	require.NoError(t, b.Close())
	require.Less(t, time.Since(start), testtime.Bound(time.Second))

	release()
	require.Eventually(t, func() bool { return wakeup.Closed(q.done) }, testtime.Bound(10*time.Second), time.Millisecond)
	post(t, holder, "user:alice", "", "not wedged")
}

// The lock file's record says who took the lock last; a reader tolerates
// a file older bees left empty, and garbage.
func TestWriteLock_Record(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	post(t, b, "user:alice", "", "job")
	r := b.lock.record()
	require.Equal(t, os.Getpid(), r.holderPID)
	require.WithinDuration(t, time.Now(), r.holderSince, time.Minute)
	require.Equal(t, b.file, r.db)
	require.Zero(t, r.damaged)
	raw, err := os.ReadFile(path + "-lock")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), fmt.Sprintf("holder %d ", os.Getpid())), "%q", raw)

	require.NoError(t, os.WriteFile(path+"-lock", []byte("\x00garbage\n"), 0o600))
	require.Zero(t, b.lock.record())
	require.NoError(t, os.Truncate(path+"-lock", 0))
	require.Zero(t, b.lock.record())
	post(t, b, "user:alice", "", "still works")
}

func TestReadProcLocks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	release, err := b.lock.acquire(t.Context())
	require.NoError(t, err)
	defer release()
	h, ok := b.lock.holder()
	require.True(t, ok)
	require.Equal(t, os.Getpid(), h.pid)
	require.False(t, h.since.IsZero())
	require.Contains(t, h.String(), fmt.Sprintf("pid %d (", os.Getpid()))
	require.NotContains(t, h.String(), "stopped")
}

// A write lock held through an inherited descriptor (a child that
// inherited the locked descriptor outlives the process that took the
// lock): the refusal names the child as the holder and the taker as
// gone, never the dead taker as the holder (/proc/locks names only it).
func TestBoard_LockHeldThroughInheritedDescriptor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{BusyTimeout: 300 * time.Millisecond})
	post(t, b, "user:alice", "", "first")

	locker := boardtest.StartProc(t, "locker", path)
	child, err := strconv.Atoi(strings.TrimPrefix(locker.Expect("child ", 30*time.Second), "child "))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	taker := locker.Pid()
	locker.Finish(30 * time.Second) // gone, and reaped

	_, err = b.Post(t.Context(), "user:alice", actions.Draft{Title: "second"})
	require.ErrorIs(t, err, ErrLocked)
	t.Log(err)
	require.ErrorContains(t, err, fmt.Sprintf("is locked by pid %d (", child))
	require.ErrorContains(t, err, fmt.Sprintf("which inherited the descriptor pid %d (gone) locked", taker))
	require.ErrorContains(t, err, "until it exits or closes that descriptor")
	require.NotContains(t, err.Error(), fmt.Sprintf("locked by pid %d", taker))

	require.NoError(t, syscall.Kill(child, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "third"})
		return err == nil
	}, testtime.Bound(10*time.Second), 50*time.Millisecond, "the lock is free once the child is gone")
}
