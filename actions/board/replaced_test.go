package board

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// A board file moved away, deleted or replaced while another process has
// it open: that process stops with an error that names the path and says
// what happened (never reading or writing the old file as if it were the
// board), lets go of the old file's siblings at once, and a new board at
// the path works, so the board never splits.
func TestBoard_FileMovedUnderAProcess(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"moved", "deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "board.db")
			b, err := Open(path, nil)
			require.NoError(t, err)
			post(t, b, "user:alice", "", "old job")
			require.NoError(t, b.Close())

			follower := boardtest.StartProc(t, "follower", path)
			follower.Expect("ready", 30*time.Second)
			require.Equal(t, "got a-1 old job", follower.Expect("got ", 30*time.Second))

			switch how {
			case "moved":
				require.NoError(t, os.Rename(path, path+".bad"))
			case "deleted":
				require.NoError(t, os.Remove(path))
			case "replaced":
				other := filepath.Join(dir, "other.db")
				ob, err := Open(other, nil)
				require.NoError(t, err)
				post(t, ob, "user:alice", "", "other board's job")
				require.NoError(t, ob.Close())
				require.NoError(t, os.Rename(other, path))
			}
			moved := time.Now()
			line := follower.Expect("err ", 30*time.Second)
			took := time.Since(moved)
			t.Logf("the follower stopped %v after the %s: %s", took, how, line)
			require.Less(t, took, testtime.Bound(10*time.Second), "an idle Board notices through its file watch, not at its next look")
			require.Contains(t, line, "board "+path+" was ")
			require.Contains(t, line, ErrReplaced.Error())
			if how == "replaced" {
				require.Contains(t, line, "replaced by another file")
			} else {
				require.Contains(t, line, "moved away or deleted")
			}
			// Latched: the next call says the same.
			require.Contains(t, follower.Expect("err ", 30*time.Second), ErrReplaced.Error())
			follower.Expect("stopped", 30*time.Second)

			start := time.Now()
			nb := openTest(t, path, &Options{BusyTimeout: 10 * time.Second})
			t.Logf("a new Board opened %v after asking", time.Since(start))
			want := "new job"
			if how == "replaced" {
				want = "other board's job" // the file now there is that board
				post(t, nb, "user:alice", "", "new job")
			} else {
				rec := post(t, nb, "user:alice", "", "new job")
				require.Equal(t, "a-1", rec.ID)
			}
			got, err := nb.Get(t.Context(), "a-1")
			require.NoError(t, err)
			require.Equal(t, want, got.Title)
			// Another process can use the new board too.
			poster := boardtest.StartProc(t, "poster", path)
			poster.Expect("ready", 30*time.Second)
			poster.Send("post from elsewhere")
			poster.Expect("posted a-", 30*time.Second)
			poster.Finish(30 * time.Second)

			follower.Finish(30 * time.Second)
			if how == "moved" {
				// The moved file is the old board, whole.
				old := openTest(t, path+".bad", nil)
				got, err := old.Get(t.Context(), "a-1")
				require.NoError(t, err)
				require.Equal(t, "old job", got.Title)
				n, err := listAll(t, old)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
		})
	}
}

// A process that has the board file open, and is stopped, keeps the old
// file's siblings; a new Board at the path waits for it up to the busy
// timeout, then says who holds them, and the bridge-style retry succeeds
// once it continues and lets go.
func TestBoard_FileMovedUnderAStoppedProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	staller := boardtest.StartProc(t, "staller", path)
	staller.Expect("ready", 30*time.Second)
	staller.Send("post old")
	staller.Expect("posted a-1", 30*time.Second)
	pid := staller.Pid()
	require.NoError(t, stopProc(pid))
	stopped(t, pid)
	t.Cleanup(func() { _ = contProc(pid) })

	require.NoError(t, os.Rename(path, path+".bad"))
	_, err := Open(path, &Options{BusyTimeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	var temp interface{ Temporary() bool }
	require.ErrorAs(t, err, &temp)
	require.Contains(t, err.Error(), "board "+path+" was moved away, deleted or replaced")
	require.Contains(t, err.Error(), "stopped")
	t.Log(err)

	require.NoError(t, contProc(pid))
	var b *Board
	require.Eventually(t, func() bool {
		b, err = Open(path, &Options{BusyTimeout: 300 * time.Millisecond})
		return err == nil
	}, testtime.Bound(30*time.Second), 10*time.Millisecond, "last error: %v", err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	rec := post(t, b, "user:alice", "", "new")
	require.Equal(t, "a-1", rec.ID)
	// The stopped process, continued, refuses to post to the old file.
	staller.Send("post late")
	lines := staller.FinishFailing(30 * time.Second)
	require.Contains(t, strings.Join(lines, "\n"), ErrReplaced.Error())
}

// A WAL left next to the path by a process killed while it had the file
// open, then the file moved away, is set aside rather than applied to the
// new board.
func TestBoard_OrphanedWALSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	poster := boardtest.StartProc(t, "poster", path)
	poster.Expect("ready", 30*time.Second)
	poster.Send("post in the WAL")
	poster.Expect("posted a-1", 30*time.Second)
	poster.Kill()
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Positive(t, fi.Size(), "the killed process left its WAL")

	require.NoError(t, os.Rename(path, path+".bad"))
	b := openTest(t, path, nil)
	n, err := listAll(t, b)
	require.NoError(t, err)
	require.Zero(t, n, "a new, empty board")
	orphans, err := filepath.Glob(path + "-wal.orphaned-*")
	require.NoError(t, err)
	require.Len(t, orphans, 1)
	rec := post(t, b, "user:alice", "", "new")
	require.Equal(t, "a-1", rec.ID)
}
