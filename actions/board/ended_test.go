package board

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// A board file written by schema 5 (ended actions in the hot table) opens
// with its ended actions moved to ended_actions, seq and rev kept, and the
// live ones left; every view reads them as before, an outcome nobody was
// told of is still told, a blocked action whose prerequisite ended done
// before the migration opens when its other one ends, and no seq comes
// back.
func TestBoard_MigratesSchema5(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v5.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for v := 1; v <= 5; v++ {
		_, err = db.Exec(migrations[v])
		require.NoError(t, err, "schema %d", v)
	}
	_, err = db.Exec(`INSERT INTO meta (key, value) VALUES ('board_id', 'abcd1234')`)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	const poster, worker = "agent:old#00000003", "agent:old#00000001"
	type row struct {
		state, holder, text, by string
		claimed, ended, told    any
	}
	rows := []row{
		1: {"done", worker, "it worked", worker, now, now, nil}, // nobody told
		2: {"claimed", worker, "", "", now, nil, nil},
		3: {"blocked", "", "", "", nil, nil, nil}, // waits for 1 (done) and 2
		4: {"failed", worker, "no disk", worker, now, now, now},
		5: {"cancelled", "", "not needed", "user:alice", nil, now, now},
		6: {"open", "", "", "", nil, nil, nil},
		7: {"done", worker, "gone", worker, now, now, now}, // deleted below: its seq must not come back
	}
	for i := 1; i < len(rows); i++ {
		r := rows[i]
		col := "reason"
		if r.state == "done" {
			col = "result"
		}
		_, err = db.Exec(`INSERT INTO actions (to_whom, from_whom, title, body, state, holder, `+col+`, ended_by, posted_at,
				claimed_at, done_at, told_at, rev)
			VALUES ('someone', ?, ?, 'old body', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			poster, fmt.Sprintf("old job %d", i), r.state, r.holder, r.text, r.by, now, r.claimed, r.ended, r.told, 10*i)
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO prerequisites (seq, pre, ord) VALUES (3, 1, 0), (3, 2, 1)`)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM actions WHERE seq = 7`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until) VALUES (?, 'old', 0, ?, ?, ?)`,
		worker, now, now, now+3_600_000)
	require.NoError(t, err)
	_, err = db.Exec(`PRAGMA user_version = 5`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	b := openTest(t, path, nil)
	ctx := t.Context()

	// The tables: ended rows moved, seq and rev kept.
	tableOf := func(table string) map[int64]int64 {
		t.Helper()
		got := map[int64]int64{}
		rs, err := b.db.Query(`SELECT seq, rev FROM ` + table)
		require.NoError(t, err)
		defer rs.Close()
		for rs.Next() {
			var seq, rev int64
			require.NoError(t, rs.Scan(&seq, &rev))
			got[seq] = rev
		}
		require.NoError(t, rs.Err())
		return got
	}
	require.Equal(t, map[int64]int64{2: 20, 3: 30, 6: 60}, tableOf("actions"))
	require.Equal(t, map[int64]int64{1: 10, 4: 40, 5: 50}, tableOf("ended_actions"))

	// Every view as before.
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 6)
	for _, r := range p.Records {
		want := rows[r.Seq]
		require.Equal(t, fmt.Sprintf("old job %d", r.Seq), r.Title)
		require.Equal(t, actions.State(want.state), r.State, r.ID)
		require.Equal(t, want.holder, r.Holder, r.ID)
		require.Equal(t, want.text, r.Result+r.Reason, r.ID)
	}
	blocked, err := b.Get(ctx, "a-3")
	require.NoError(t, err)
	require.Equal(t, []string{"a-1", "a-2"}, blocked.After)
	require.Equal(t, []string{"a-2"}, blocked.BlockedBy, "a-1 ended done before the migration")
	ended, err := b.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{actions.Done, actions.Failed, actions.Cancelled}})
	require.NoError(t, err)
	require.Len(t, ended.Records, 3)

	// The outcome nobody was told of is told once.
	n, ok, err := b.Notice(ctx, poster, nil, testtime.Bound(5*time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, "a-1", n.Record.ID)
	_, ok, err = b.Notice(ctx, poster, nil, 200*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok, "told once")

	// Ending the claimed one moves it and opens its waiter.
	done, err := b.Finish(ctx, worker, "a-2", "late")
	require.NoError(t, err)
	require.Equal(t, actions.Done, done.State)
	opened, err := b.Get(ctx, "a-3")
	require.NoError(t, err)
	require.Equal(t, actions.Open, opened.State)
	require.Contains(t, tableOf("ended_actions"), int64(2))
	require.NotContains(t, tableOf("actions"), int64(2))

	// No seq comes back, and revs keep rising.
	r := boardtest.Mint(t, "new")
	rec, err := b.Post(ctx, actions.Agent(r), actions.Draft{Title: "new"})
	require.NoError(t, err)
	require.Equal(t, "a-8", rec.ID)
	var rev int64
	require.NoError(t, b.db.QueryRow(`SELECT rev FROM actions WHERE seq = 8`).Scan(&rev))
	require.Greater(t, rev, int64(60))
}

// The views that read both tables walk each by its index and merge the
// two in order: a page of every action never sorts, nor scans, a long
// history.
func TestEveryAction_PlansMerge(t *testing.T) {
	t.Parallel()
	b := openTest(t, filepath.Join(t.TempDir(), "board.db"), nil)
	for _, q := range []string{
		`SELECT ` + everyCols + `, rev FROM every_action WHERE (rev, seq) > (?1, ?1) ORDER BY rev, seq LIMIT 10`,
		`SELECT ` + everyCols + ` FROM every_action WHERE seq > ?1 ORDER BY seq LIMIT 10`,
		`SELECT ` + everyCols + ` FROM every_action WHERE seq > ?1 AND state IN ('open', 'done') ORDER BY seq LIMIT 10`,
	} {
		plan := explain(t, b, q, 1)
		require.Contains(t, plan, "MERGE (UNION ALL)", plan)
		require.NotContains(t, plan, "SCAN actions", plan)
		require.NotContains(t, plan, "SCAN ended_actions", plan)
		require.NotContains(t, plan, "FOR ORDER BY", plan)
	}
}
