package board

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
)

// fillBoard posts n actions with bodies long enough to spread them over
// many pages, checkpoints, and returns the file's size.
func fillBoard(t *testing.T, b *Board, n int) int64 {
	t.Helper()
	for i := 1; i <= n; i++ {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: fmt.Sprintf("needle-%d", i), Body: string(bytes.Repeat([]byte{'x'}, 200))})
		require.NoError(t, err)
	}
	_, err := b.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	fi, err := os.Stat(b.path)
	require.NoError(t, err)
	return fi.Size()
}

// listAll pages through the whole board.
func listAll(t *testing.T, b *Board) (int, error) {
	var c actions.Cursor
	n := 0
	for {
		p, err := b.List(t.Context(), c)
		if err != nil {
			return n, err
		}
		if len(p.Records) == 0 {
			return n, nil
		}
		n += len(p.Records)
		c = p.Cursor
	}
}

func requireCorrupt(t *testing.T, err error, path string, detail string) {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "move it aside")
	require.Contains(t, err.Error(), detail)
}

// A file cut short in the middle of a page is refused when opened. SQLite
// reads the missing part of a cut page as zeros, and a Board that had the
// file open when it was cut reports the rows it finds there as damage, not
// as a raw scan error.
func TestBoard_TruncatedFileRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	size := fillBoard(t, b, 300)
	require.NoError(t, b.Close())

	// What a Board that has not yet read the last actions sees once the
	// file is cut inside their page: the page's end (where SQLite keeps
	// the rows) reads as zeros.
	b = openTest(t, path, nil)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	at := int64(bytes.Index(raw, []byte("needle-300")))
	require.Positive(t, at)
	const pageSize = 4096
	page := at / pageSize * pageSize
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, pageSize/2), page+pageSize/2)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	n, err := listAll(t, b)
	t.Logf("listed %d, then: %v", n, err)
	requireCorrupt(t, err, path, "breaks bee's schema")

	require.NoError(t, os.Truncate(path, size-100))
	_, err = Open(path, nil)
	requireCorrupt(t, err, path, "cut short")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, size-100, fi.Size(), "the file is left as it was")
}

// A board file emptied to 0 bytes is refused, not taken for a new board;
// moving it aside, as the error advises, starts a new board; an empty file
// nobody ever used is a new board.
func TestBoard_EmptiedFileRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	post(t, b, "user:alice", "", "kept")
	require.NoError(t, b.Close())

	require.NoError(t, os.Truncate(path, 0))
	_, err = Open(path, nil)
	requireCorrupt(t, err, path, "it is empty, but it was a board")
	_, err = Open(path, nil)
	requireCorrupt(t, err, path, "it is empty")

	require.NoError(t, os.Rename(path, path+".bad"))
	fresh := openTest(t, path, nil)
	n, err := listAll(t, fresh)
	require.NoError(t, err)
	require.Zero(t, n)
	post(t, fresh, "user:alice", "", "new")

	touched := filepath.Join(t.TempDir(), "board.db")
	require.NoError(t, os.WriteFile(touched, nil, 0o600))
	post(t, openTest(t, touched, nil), "user:alice", "", "new")
}

// Once any Board finds the file damaged, it refuses every later call, every
// Board's writes refuse it, and so does every later Open.
func TestBoard_DamagedFileRefusesWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	fillBoard(t, b, 300)
	require.NoError(t, b.Close())

	// Wreck the header of the page that holds needle-150: SQLite finds it
	// only when it reads that page.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	at := bytes.Index(raw, []byte("needle-150"))
	require.Positive(t, at)
	const pageSize = 4096
	page := int64(at / pageSize * pageSize)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xee}, 12), page)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	finder := openTest(t, path, nil)
	other := openTest(t, path, nil)
	post(t, other, "user:alice", "", "written before anyone noticed")

	_, err = finder.Get(t.Context(), "a-150")
	requireCorrupt(t, err, path, "SQLite reports it damaged")
	_, err = finder.Post(t.Context(), "user:alice", actions.Draft{Title: "after"})
	requireCorrupt(t, err, path, "SQLite reports it damaged")
	_, err = finder.List(t.Context(), "")
	requireCorrupt(t, err, path, "SQLite reports it damaged")

	// Another Board's writes read the mark at most every damageCheckEvery.
	marked := time.Now()
	require.Eventually(t, func() bool {
		_, err = other.Post(t.Context(), "user:alice", actions.Draft{Title: "after"})
		return err != nil
	}, testtime.Bound(10*time.Second), 10*time.Millisecond)
	t.Logf("another Board refused its writes %v after the damage was found", time.Since(marked))
	requireCorrupt(t, err, path, fmt.Sprintf("pid %d found it damaged", os.Getpid()))
	require.Less(t, time.Since(marked), testtime.Bound(5*time.Second))
	_, err = Open(path, nil)
	requireCorrupt(t, err, path, "found it damaged")

	// Moved aside, a new board starts at the path.
	require.NoError(t, os.Rename(path, path+".bad"))
	post(t, openTest(t, path, nil), "user:alice", "", "new")
}

// A board file emptied (truncated to 0 bytes) under a running Board stops
// it at the next call, with an error that says the file was emptied and
// what to do. Before, posts went on committing into the WAL of the empty
// file, and a claim waited the whole busy timeout and read "another
// process has held it for more than 5s".
func TestBoard_EmptiedUnderARunningBoard(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	other := openTest(t, path, nil) // another Board that has it open
	alice := mint(t, "alice")
	post(t, b, alice, "", "first")
	require.NoError(t, os.Truncate(path, 0))

	requireEmptied := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "board "+path+" was emptied (truncated to 0 bytes) while this process had it open")
		require.ErrorContains(t, err, "mv "+path+" "+path+".bad")
		require.NotContains(t, err.Error(), "held it for more than")
	}
	start := time.Now()
	_, err := b.Post(t.Context(), actions.Agent(alice), actions.Draft{Title: "second"})
	requireEmptied(err)
	_, err = other.Next(t.Context(), mint(t, "worker"), "", time.Second)
	requireEmptied(err)
	_, err = b.List(t.Context(), "")
	requireEmptied(err)
	require.Less(t, time.Since(start), testtime.Bound(2*time.Second), "no call waits for a lock")
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, info.Size(), "nothing was written into the emptied file")
}
