package board

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// Once a Board has warmed (as it does the first time a Next sleeps), a
// woken waiter's claim and the end of what it claimed parse no statement
// on the wake's path: warmQueries holds every one they run.
func TestBoard_WarmPreparesClaimAndEnd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	poster := openTest(t, path, nil)
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	p, err := b.Next(t.Context(), who, "", 10*time.Millisecond) // looks, sleeps
	require.NoError(t, err)
	require.Empty(t, p.Records)
	b.warm() // as the first sleep did, in the background
	prepared := func() int {
		b.wstmts.mu.Lock()
		defer b.wstmts.mu.Unlock()
		return b.wstmts.prepared
	}
	before := prepared()
	known := map[string]bool{}
	b.wstmts.mu.Lock()
	for q := range b.wstmts.m {
		known[q] = true
	}
	b.wstmts.mu.Unlock()

	for _, end := range []string{"finish", "fail"} {
		_, err := poster.Post(t.Context(), "user:alice", actions.Draft{To: "w", Title: end})
		require.NoError(t, err)
		p, err := b.Next(t.Context(), who, "", 10*time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		if end == "finish" {
			_, err = b.Finish(t.Context(), who, p.Records[0].ID, "ok")
		} else {
			_, err = b.Fail(t.Context(), who, p.Records[0].ID, "no")
		}
		require.NoError(t, err)
	}
	var added []string
	b.wstmts.mu.Lock()
	for q := range b.wstmts.m {
		if !known[q] {
			added = append(added, q)
		}
	}
	b.wstmts.mu.Unlock()
	require.Equal(t, before, prepared(), "statements parsed after the warm-up: %q", added)
}
