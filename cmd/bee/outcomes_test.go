package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// exitOf is the exit status bee would end with for err.
func exitOf(err error) int {
	var buf bytes.Buffer
	return exitCode(err, &buf)
}

// A worker on the board: joined as this process, claiming what is posted.
func worker(t *testing.T, path string) (*board.Board, identity.ID) {
	t.Helper()
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	who := identity.ID("agent:worker#0000000c")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	return b, who
}

func claim(t *testing.T, b *board.Board, who identity.ID) actions.Record {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", 5*time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	return p.Records[0]
}

func TestMain_WaitExitCodes(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	b, w := worker(t, path)
	bee(t, path, "post", "one")
	bee(t, path, "post", "two")
	claim(t, b, w)
	claim(t, b, w)

	type result struct {
		out string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		out, _, err := run(t, path, "", "wait", "a-1", "a-2", "--timeout", "30s")
		ch <- result{out, err}
	}()
	_, err := b.Finish(t.Context(), w, "a-1", "fine")
	require.NoError(t, err)
	_, err = b.Fail(t.Context(), w, "a-2", "no disk")
	require.NoError(t, err)
	r := <-ch
	require.Equal(t, 1, exitOf(r.err), "a failed action: exit 1 (%v)", r.err)
	require.Contains(t, r.out, "a-1 done by "+string(w)+": fine\n")
	require.Contains(t, r.out, "a-2 failed by "+string(w)+": no disk\n")

	require.NoError(t, exitErrOrNil(run(t, path, "", "wait", "a-1")), "all done: exit 0")
	out, _, err := run(t, path, "", "wait", "a-1", "--json")
	require.NoError(t, err)
	var recs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	require.Len(t, recs, 1)
	require.Equal(t, "fine", recs[0].Result)

	bee(t, path, "post", "three")
	start := time.Now()
	_, _, err = run(t, path, "", "wait", "a-3", "--timeout", "200ms")
	require.Equal(t, exitTimeout, exitOf(err), "timeout: exit 124 (%v)", err)
	require.ErrorContains(t, err, "a-3")
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second))

	_, _, err = run(t, path, "", "wait")
	require.Equal(t, 2, exitOf(err))
	_, _, err = run(t, path, "", "wait", "a-99")
	require.Equal(t, exitNo, exitOf(err), "the board knows no a-99: exit 1")
	require.ErrorContains(t, err, "a-99")
}

func exitErrOrNil(_, _ string, err error) error { return err }

func TestMain_CancelAndReaddress(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	b, w := worker(t, path)
	bee(t, path, "post", "held one")
	bee(t, path, "post", "--to", "gone", "open one")
	claim(t, b, w)

	out := bee(t, path, "cancel", "a-1", "--reason", "plans changed")
	require.Contains(t, out, "cancelled a-1")
	require.Contains(t, out, string(w)+" held it")
	_, err := b.Finish(t.Context(), w, "a-1", "")
	require.ErrorContains(t, err, "cancelled by user:tester: plans changed")
	_, _, err = run(t, path, "", "cancel", "a-1")
	require.Equal(t, 1, exitOf(err), "cancelling an ended action fails")
	require.EqualError(t, err, "bee cancel: a-1 has ended already: cancelled by user:tester (plans changed)")

	_, _, err = run(t, path, "", "readdress", "a-2", "--to", "agent:gone#00000001")
	require.Equal(t, exitNo, exitOf(err), "the board says no")
	require.ErrorContains(t, err, "never joined")
	out = bee(t, path, "readdress", "a-2", "--to", "worker")
	require.Equal(t, "a-2 is now for worker: open one\n", out)
	require.Equal(t, "a-2", claim(t, b, w).ID)
	_, _, err = run(t, path, "", "readdress", "a-2", "--anyone")
	require.ErrorIs(t, err, actions.ErrNotOpen)

	for _, args := range [][]string{
		{"cancel"}, {"readdress", "a-2"}, {"readdress", "a-2", "--to", "x", "--anyone"},
	} {
		_, _, err := run(t, path, "", args...)
		require.Equal(t, exitUsage, exitOf(err), "%v: %v", args, err)
	}
	_, _, err = run(t, path, "", "cancel", "a-77")
	require.Equal(t, exitNo, exitOf(err), "an unknown id: the board says no")

	// list filters by every state, ended ones together too.
	bee(t, path, "post", "open again")
	lines := func(args ...string) []string {
		return strings.Split(strings.TrimSpace(bee(t, path, append([]string{"list"}, args...)...)), "\n")
	}
	require.Len(t, lines("--state", "cancelled"), 2, "header and a-1")
	require.Len(t, lines("--state", "ended"), 2)
	require.Len(t, lines("--state", "claimed"), 2)
	require.Len(t, lines("--state", "open"), 2)
	require.Len(t, lines("--all"), 4)
	show := bee(t, path, "show", "a-1")
	require.Contains(t, show, "cancelled by user:tester")
	require.Contains(t, show, "reason:\nplans changed")
}
