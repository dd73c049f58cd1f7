package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/testtime"
)

// posterRole is the test binary run as a writer on the board
// $BEE_TEST_BOARD (BEE_TEST_RUN_AS=poster): it posts one action after
// another, printing each one's id once it is committed, until its stdin
// closes.
func posterRole() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	b, err := board.Open(os.Getenv("BEE_TEST_BOARD"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "poster:", err)
		return 1
	}
	defer b.Close()
	for i := 0; ctx.Err() == nil; i++ {
		rec, err := b.Post(ctx, "user:poster", actions.Draft{Title: "post " + strconv.Itoa(i), Body: strings.Repeat("body ", 50)})
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "poster:", err)
			return 1
		}
		fmt.Println(rec.ID)
	}
	return 0
}

// bee backup copies the board consistently while other processes write to
// it: every copy holds every action committed before it began, no action
// is missing in between (ids 1..N, none skipped), the copy is one file
// that needs no -wal, and it is a board bee opens.
func TestMain_BackupWhileWritersRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	bee(t, path, "post", "before the writers")

	var mu sync.Mutex
	committed := 1 // the highest seq a writer has reported committed
	var wg sync.WaitGroup
	var stdins []io.Closer
	for range 2 {
		cmd := beeProcRole(t, "poster", "BEE_TEST_BOARD="+path)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		stdins = append(stdins, stdin)
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "a-"))
				if err == nil {
					mu.Lock()
					committed = max(committed, n)
					mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("a writer failed: %v; stderr: %s", err, stderr.String())
			}
		})
	}
	stopWriters := sync.OnceFunc(func() {
		for _, c := range stdins {
			_ = c.Close()
		}
		wg.Wait()
	})
	t.Cleanup(stopWriters)

	// Wait until the writers are writing.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return committed > 20 }, testtime.Bound(30*time.Second), 10*time.Millisecond)

	var last int
	for i := range 5 {
		mu.Lock()
		before := committed
		mu.Unlock()
		copyPath := filepath.Join(dir, fmt.Sprintf("copy-%d.db", i))
		out := bee(t, path, "backup", copyPath)
		require.Equal(t, "backed up "+path+" to "+copyPath+"\n", out)
		mu.Lock()
		after := committed
		mu.Unlock()

		require.NoFileExists(t, copyPath+"-wal", "the copy is one file")
		n, maxSeq, check := inspectCopy(t, copyPath)
		require.Equal(t, "ok", check, "the copy passes SQLite's integrity check")
		require.Equal(t, maxSeq, n, "no action missing between 1 and the last (a copy of one moment)")
		require.GreaterOrEqual(t, n, before, "every action committed before the backup began is in it")
		t.Logf("backup %d: %d actions (%d known committed before it began, %d after it ended)", i, n, before, after)
		last = n
		time.Sleep(20 * time.Millisecond) // let the writers write between copies
	}
	stopWriters()
	mu.Lock()
	total := committed
	mu.Unlock()
	require.Greater(t, total, last, "the writers went on writing after the copies")

	// The copy is a board: bee reads it like any.
	var recs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, filepath.Join(dir, "copy-4.db"), "list", "--all", "--json")), &recs))
	require.Len(t, recs, last)
	require.Equal(t, "before the writers", recs[0].Title)
}

// inspectCopy reads a backup without opening it as a board: its actions,
// the highest seq, and SQLite's integrity check.
func inspectCopy(t *testing.T, path string) (n, maxSeq int, check string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*), coalesce(max(seq), 0) FROM every_action`).Scan(&n, &maxSeq))
	require.NoError(t, db.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&check))
	return n, maxSeq, check
}

// beeProcRole returns the test binary run as role (see TestMain), with
// env.
func beeProcRole(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	return beeProc(t, append(env, envRunAs+"="+role))
}
