package board

import (
	"database/sql"
	"errors"
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

// joinLive mints an identity of agent name and joins it as this process.
func joinLive(t *testing.T, b *Board, name string) identity.ID {
	t.Helper()
	who := mint(t, name)
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	return who
}

// A holder killed with SIGKILL shows as gone in every view at once: its
// claim is open again and what was addressed to it goes to its agent name,
// without waiting for its lease or for another bridge to look.
func TestBoard_KilledHolderDepartsAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil) // the default 60 s lease: the test must not wait for it
	job := post(t, b, "user:alice", "", "job")
	holder := boardtest.StartProc(t, "holder", path)
	f := strings.Fields(holder.Expect("claimed ", 30*time.Second))
	require.Equal(t, job.ID, f[1])
	victim := f[2]
	addressed := post(t, b, "user:alice", victim, "for the victim exactly")

	holder.Kill()

	got, err := b.Get(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State, "the dead holder's claim is back at once")
	got, err = b.Get(t.Context(), addressed.ID)
	require.NoError(t, err)
	require.Equal(t, "holder", got.To, "addressed work goes to the agent name")
	ms, err := b.Members(t.Context())
	require.NoError(t, err)
	require.Empty(t, ms)
	_, err = b.Post(t.Context(), "user:alice", actions.Draft{To: victim, Title: "more"})
	require.ErrorIs(t, err, actions.ErrNotLive)
}

// A claim whose holder has gone is marked in every view even before it is
// given back (here: the member row says the holder's process is gone but
// the departure has not been written yet).
func TestBoard_HolderGoneMarked(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", nil)
	who := joinLive(t, b, "w")
	r := post(t, b, "user:alice", "", "job")
	require.Equal(t, r.ID, next(t, b, who).ID)
	live, err := (*store)(b).Alive(t.Context(), []string{string(who), "agent:w#00000000"})
	require.NoError(t, err)
	require.True(t, live[string(who)], "a live holder")
	require.False(t, live["agent:w#00000000"], "an unknown holder")
}

// Await in one process is woken by a fail in another, and returns the
// outcome; the poster has then heard, so its waiter is not woken for it.
func TestBoard_AwaitWokenAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{SafetyPoll: 30 * time.Second})
	poster := joinLive(t, b, "lead")
	worker := boardtest.StartProc(t, "worker", path)
	worker.Expect("ready ", 30*time.Second)
	r := post(t, b, poster, "worker", "try it")
	other := post(t, b, poster, "", "never ends")
	worker.Send("claim")
	require.Equal(t, "claimed "+r.ID, worker.Expect("claimed ", 10*time.Second))

	type result struct {
		recs []actions.Record
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		recs, err := b.Await(t.Context(), actions.Agent(poster), []string{other.ID, r.ID}, 20*time.Second)
		ch <- result{recs, err}
	}()
	start := time.Now()
	worker.Send("fail " + r.ID + " no such file")
	worker.Expect("ended "+r.ID+" failed", 10*time.Second)
	res := <-ch
	took := time.Since(start)
	require.NoError(t, res.err)
	require.Len(t, res.recs, 1)
	require.Equal(t, actions.Failed, res.recs[0].State)
	require.Equal(t, "no such file", res.recs[0].Reason)
	t.Logf("await returned %v after asking the other process to fail the action", took)
	require.Less(t, took, 10*time.Second, "woken by the ended file, not the 30 s safety poll")

	n, ok, err := b.Notice(t.Context(), poster, []string{other.ID}, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "the awaited outcome was told, yet noticed: %+v", n)

	recs, err := b.Await(t.Context(), actions.Agent(poster), []string{other.ID}, 50*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, recs, "timeout: an empty list")
	require.NotNil(t, recs)
	_, err = b.Await(t.Context(), actions.Agent(poster), []string{r.ID, "a-77"}, time.Second)
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	require.ErrorContains(t, err, "a-77")
	worker.Finish(10 * time.Second)
}

// A board file written by the first schema (today's bee before outcomes)
// opens, keeps every action and member as they were, and takes the new
// states; ids are never reused.
func TestBoard_MigratesSchema1(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec(migrations[1])
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO meta (key, value) VALUES ('board_id', 'abcd1234')`)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	for _, row := range []struct {
		state, holder, result string
		claimed, done         any
	}{
		{"open", "", "", nil, nil},
		{"claimed", "agent:old#00000001", "", now, nil},
		{"done", "agent:old#00000002", "it worked", now, now},
		{"open", "", "", nil, nil}, // deleted below, so its seq must not come back
	} {
		_, err = db.Exec(`INSERT INTO actions (to_whom, from_whom, title, body, state, holder, result, posted_at, claimed_at, done_at, rev)
			VALUES ('', 'agent:old#00000003', 'old job', 'old body', ?, ?, ?, ?, ?, ?, 1)`,
			row.state, row.holder, row.result, now, row.claimed, row.done)
		require.NoError(t, err)
	}
	_, err = db.Exec(`DELETE FROM actions WHERE seq = 4`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until) VALUES ('agent:old#00000001', 'old', ?, ?, ?, ?)`,
		os.Getpid(), now, now, now+60_000)
	require.NoError(t, err)
	_, err = db.Exec(`PRAGMA user_version = 1`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	b := openTest(t, path, nil)
	ctx := t.Context()
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 3, "every action kept")
	require.Equal(t, actions.Open, p.Records[0].State)
	require.Equal(t, actions.Claimed, p.Records[1].State)
	require.Equal(t, "agent:old#00000001", p.Records[1].Holder)
	require.Equal(t, actions.Done, p.Records[2].State)
	require.Equal(t, "it worked", p.Records[2].Result)
	require.Equal(t, "agent:old#00000002", p.Records[2].EndedBy)
	require.NotNil(t, p.Records[2].EndedAt)
	for _, r := range p.Records {
		require.Equal(t, "old job", r.Title)
		require.Equal(t, "old body", r.Body)
	}
	ms, err := b.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1, "members kept")

	r := post(t, b, "user:alice", "", "new")
	require.Equal(t, "a-5", r.ID, "ids are never reused")
	_, err = b.Cancel(ctx, "user:alice", r.ID, "testing the new states")
	require.NoError(t, err)
	// The old done action counts as told: nobody is woken for old news.
	old := mint(t, "old")
	require.NoError(t, b.Join(ctx, actions.Member{ID: old, PID: os.Getpid()}))
	_, ok, err := b.Notice(ctx, old, []string{"a-1"}, 50*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)

	var v int
	require.NoError(t, b.db.QueryRow("PRAGMA user_version").Scan(&v))
	require.Equal(t, schemaVersion, v)
	b2 := openTest(t, path, nil) // opening again migrates nothing
	_, err = b2.Get(ctx, "a-2")
	require.NoError(t, err)
	if errors.Is(err, ErrNewerSchema) {
		t.Fatal("unreachable")
	}
}
