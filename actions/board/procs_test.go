package board

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/internal/testtime"
)

// Several processes share one board file: every action posted is claimed
// exactly once and finished by the identity that claimed it, none lost.
func TestBoard_ManyProcesses(t *testing.T) {
	t.Parallel()
	const (
		procs   = 5
		waiters = 4 // identities per process, each waiting concurrently
		posters = 2 // goroutines posting in this process meanwhile
	)
	// Under -race (the costliest test of the package at 400: 22 s of CPU)
	// and -short, 200 actions still give each of the 20 waiters ten claims
	// against 19 others; the 3,000 run without either.
	total := 3000
	if raceEnabled || testing.Short() {
		total = 200
	}
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)

	workers := make([]*boardtest.Proc, procs)
	for i := range workers {
		workers[i] = boardtest.StartProc(t, "claimer", path, fmt.Sprintf("%s=%d", boardtest.EnvWaiters, waiters))
	}
	for _, w := range workers {
		w.Expect("ready", 30*time.Second)
	}

	start := time.Now()
	posted := make(chan string, total)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := p; i < total; i += posters {
				r, err := b.Post(t.Context(), "user:tester", actions.Draft{Title: fmt.Sprintf("job %d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				posted <- r.ID
			}
		})
	}
	wg.Wait()
	close(posted)
	require.False(t, t.Failed())

	// Wait (on the board's own change feed) until every action is done.
	cursor, err := b.Head(t.Context())
	require.NoError(t, err)
	deadline := time.Now().Add(testtime.Bound(60 * time.Second))
	for {
		var done int
		require.NoError(t, b.db.QueryRow(`SELECT count(*) FROM every_action WHERE state = 'done'`).Scan(&done))
		if done == total {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d actions done after %v", done, total, testtime.Bound(60*time.Second))
		p, err := b.Changes(t.Context(), cursor, time.Second)
		require.NoError(t, err)
		cursor = p.Cursor
	}
	elapsed := time.Since(start)

	// Each worker's log of what it got.
	gotBy := map[string]string{} // action id -> identity that logged it
	perProc := make([]int, procs)
	for i, w := range workers {
		for _, c := range boardtest.Claims(w.Finish(30 * time.Second)) {
			prev, dup := gotBy[c.ID]
			require.False(t, dup, "%s claimed twice: by %s and %s", c.ID, prev, c.Who)
			gotBy[c.ID] = c.Who
			perProc[i]++
		}
	}
	t.Logf("%d actions posted by %d goroutines, claimed and finished by %d processes x %d identities in %v; per process %v",
		total, posters, procs, waiters, elapsed, perProc)

	ids := map[string]bool{}
	for id := range posted {
		ids[id] = true
	}
	require.Len(t, ids, total)
	require.Len(t, gotBy, total, "every action claimed once")

	rows, err := b.db.Query(`SELECT seq, state, holder, result FROM every_action`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		var state, holder, result string
		require.NoError(t, rows.Scan(&seq, &state, &holder, &result))
		id := position.ActionID(seq)
		require.True(t, ids[id], id)
		require.Equal(t, "done", state, id)
		require.Equal(t, gotBy[id], holder, "%s finished by the identity that logged it", id)
		require.Equal(t, holder, result, id)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, total, n)

	ms, err := b.Members(t.Context())
	require.NoError(t, err)
	require.Empty(t, ms, "every worker departed")
}

// A claimant killed with SIGKILL never departs; its claim goes to another
// identity once its lease runs out.
func TestBoard_KilledClaimantLosesClaimAfterLease(t *testing.T) {
	t.Parallel()
	// The lease is short, but the holder must renew it in time on a busy
	// machine too: it and the bounds below are stretched alike.
	lease := testtime.Bound(300 * time.Millisecond)
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{Lease: lease})
	a := post(t, b, "user:alice", "", "job")

	holder := boardtest.StartProc(t, "holder", path, fmt.Sprintf("%s=%d", boardtest.EnvLease, lease.Milliseconds()))
	f := strings.Fields(holder.Expect("claimed ", 30*time.Second))
	require.Equal(t, a.ID, f[1])
	victim := f[2]

	got, err := b.Get(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Claimed, got.State)
	require.Equal(t, victim, got.Holder)
	ms, err := b.Members(t.Context())
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, victim, string(ms[0].ID))
	require.Equal(t, holder.Pid(), ms[0].PID)
	require.Equal(t, []string{a.ID}, ms[0].Holding)
	nothingFor(t, b, mint(t, "thief")) // the lease holds while the holder lives

	holder.Kill()
	killed := time.Now()

	heir := mint(t, "heir")
	p, err := b.Next(t.Context(), heir, "", testtime.Bound(10*time.Second))
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, a.ID, p.Records[0].ID)
	require.Equal(t, string(heir), p.Records[0].Holder)
	t.Logf("claim offered again %v after SIGKILL (lease %v)", time.Since(killed), lease)
	require.Less(t, time.Since(killed), testtime.Bound(3*time.Second))

	ms, err = b.Members(t.Context())
	require.NoError(t, err)
	for _, m := range ms {
		require.NotEqual(t, victim, string(m.ID), "the killed identity is no longer live")
	}
}

// A post by another process wakes a waiting Next long before the safety
// poll.
func TestBoard_WakeAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	hook, sleeping := sleepSignal()
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	b := openTest(t, path, &Options{SafetyPoll: testtime.Bound(10 * time.Second), beforeSleep: hook})
	poster := boardtest.StartProc(t, "poster", path)
	poster.Expect("ready", 30*time.Second)
	who := mint(t, "w")

	for i := range 3 {
		type result struct {
			p   actions.Page
			err error
		}
		ch := make(chan result, 1)
		go func() {
			p, err := b.Next(t.Context(), who, "", testtime.Bound(8*time.Second))
			ch <- result{p, err}
		}()
		<-sleeping
		start := time.Now()
		poster.Send("post wake me")
		r := <-ch
		took := time.Since(start)
		require.NoError(t, r.err)
		require.Len(t, r.p.Records, 1)
		require.Equal(t, "wake me", r.p.Records[0].Title)
		t.Logf("round %d: woken %v after asking the other process to post", i, took)
		require.Less(t, took, testtime.Bound(2*time.Second), "woken by the notifier, not the 10 s safety poll")
	}
	poster.Finish(10 * time.Second)
}
