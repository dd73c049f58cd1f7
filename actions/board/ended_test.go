package board

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/boardtest"
)

// A board file written by schema 5 (ended actions in the hot table) opens
// with its ended actions moved to ended_actions, seq and rev kept, and the
// live ones left; every view reads them as before (see
// boardtest.CheckEndedFixture), and an action that ends afterwards moves.
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
	for seq := 1; seq < len(boardtest.EndedFixture); seq++ {
		r := boardtest.EndedFixture[seq]
		col := "reason"
		if r.State == "done" {
			col = "result"
		}
		var claimed, ended, told any
		if r.Holder != "" {
			claimed = now
		}
		if r.By != "" {
			ended = now
		}
		if r.Told {
			told = now
		}
		_, err = db.Exec(`INSERT INTO actions (to_whom, from_whom, title, body, state, holder, `+col+`, ended_by, posted_at,
				claimed_at, done_at, told_at, rev)
			VALUES ('someone', ?, ?, 'old body', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			boardtest.FixturePoster, fmt.Sprintf("old job %d", seq), r.State, r.Holder, r.Text, r.By, now, claimed, ended, told, 10*seq)
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO prerequisites (seq, pre, ord) VALUES (3, 1, 0), (3, 2, 1)`)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM actions WHERE seq = 7`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until) VALUES (?, 'old', 0, ?, ?, ?)`,
		boardtest.FixtureWorker, now, now, now+3_600_000)
	require.NoError(t, err)
	_, err = db.Exec(`PRAGMA user_version = 5`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	b := openTest(t, path, nil)
	// The tables: ended rows moved, seq and rev kept.
	seqRevs := func(table string) map[int64]int64 {
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
	require.Equal(t, map[int64]int64{2: 20, 3: 30, 6: 60}, seqRevs("actions"))
	require.Equal(t, map[int64]int64{1: 10, 4: 40, 5: 50}, seqRevs("ended_actions"))

	boardtest.CheckEndedFixture(t, b)
	require.Contains(t, seqRevs("ended_actions"), int64(2), "a-2, finished, moved")
	require.NotContains(t, seqRevs("actions"), int64(2))
	require.Greater(t, seqRevs("actions")[8], int64(60), "revs keep rising")
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
