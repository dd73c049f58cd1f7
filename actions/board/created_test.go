package board

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Created tells the Open that made the file from every other Open.
func TestBoard_Created(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new", "board.db")
	b, err := Open(path, nil)
	require.NoError(t, err)
	require.True(t, b.Created(), "the first Open creates the file")
	require.NoError(t, b.Close())

	b, err = Open(path, nil)
	require.NoError(t, err)
	require.False(t, b.Created(), "the file was there")
	require.NoError(t, b.Close())

	// An empty file someone else made is not created by Open.
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	b, err = Open(empty, nil)
	require.NoError(t, err)
	require.False(t, b.Created())
	require.NoError(t, b.Close())
}

// Of several Opens racing to create a board, exactly one says it did.
func TestBoard_CreatedOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	const n = 4
	var wg sync.WaitGroup
	created := make(chan bool, n)
	for range n {
		wg.Go(func() {
			b, err := Open(path, nil)
			if !assertNoError(t, err) {
				return
			}
			created <- b.Created()
			b.Close()
		})
	}
	wg.Wait()
	close(created)
	count := 0
	for c := range created {
		if c {
			count++
		}
	}
	require.Equal(t, 1, count)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("open: %v", err)
		return false
	}
	return true
}

// A directory where the board should be is refused with what to do, and
// the path said once (not "open X: open X: is a directory").
func TestOpen_Directory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Open(dir, nil)
	require.Error(t, err)
	require.Equal(t, "board "+dir+" is a directory, not a board file; name a file, such as "+filepath.Join(dir, "board.db"), err.Error())
}
