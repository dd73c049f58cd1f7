package board

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
)

// A board file written by schema 2 (before plans and reservations) opens, keeps
// every action as it was (carrying no paths, held back by nothing), and
// takes reservations and actions with paths.
func TestBoard_MigratesSchema2ForReservations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for v := 1; v <= 2; v++ {
		_, err = db.Exec(migrations[v])
		require.NoError(t, err, "migration %d", v)
	}
	now := time.Now().UnixMilli()
	_, err = db.Exec(`INSERT INTO meta (key, value) VALUES ('board_id', 'abcd1234')`)
	require.NoError(t, err)
	for _, state := range []string{"open", "done", "cancelled"} {
		holder := ""
		if state == "done" {
			holder = "agent:old#00000001"
		}
		_, err = db.Exec(`INSERT INTO actions (from_whom, title, state, holder, posted_at, rev) VALUES ('user:alice', ?, ?, ?, ?, 1)`,
			"old "+state, state, holder, now)
		require.NoError(t, err)
	}
	_, err = db.Exec(`PRAGMA user_version = 2`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	b := openTest(t, path, nil)
	ctx := t.Context()
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 3, "every action kept")
	for i, state := range []actions.State{actions.Open, actions.Done, actions.Cancelled} {
		require.Equal(t, state, p.Records[i].State)
		require.Equal(t, "old "+string(state), p.Records[i].Title)
		require.Empty(t, p.Records[i].Repo)
		require.Nil(t, p.Records[i].Paths)
		require.Nil(t, p.Records[i].HeldBackBy)
	}
	w := mint(t, "w")
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid()}))
	r, err := b.Reserve(ctx, "user:alice", actions.ReserveRequest{Repo: "r", Patterns: []string{"src"}})
	require.NoError(t, err)
	held, err := b.Post(ctx, "user:alice", actions.Draft{Title: "new", Repo: "r", Paths: []string{"src/x"}})
	require.NoError(t, err)
	require.Equal(t, "a-4", held.ID)
	got, err := b.Next(ctx, w, "", 0)
	require.NoError(t, err)
	require.Len(t, got.Records, 1)
	require.Equal(t, "a-1", got.Records[0].ID, "the old open action is claimable; the held one is not")
	_, err = b.ReleasePaths(ctx, "user:alice", "", nil)
	require.NoError(t, err)
	got, err = b.Next(ctx, w, "", 0)
	require.NoError(t, err)
	require.Len(t, got.Records, 1)
	require.Equal(t, held.ID, got.Records[0].ID)
	require.NotEmpty(t, r.ID)
}

// The guard's lookup and a grant's are index lookups of (repo, prefix),
// whatever the reservations hold; the claim stays an index walk.
func TestBoard_ReservationReadsUseTheIndex(t *testing.T) {
	t.Parallel()
	b := openTest(t, filepath.Join(t.TempDir(), "board.db"), nil)
	for name, s := range map[string]engine.Scope{
		"conflicts": {Repo: "r", Exact: []string{"", "src", "src/a.go"}},
		"grant":     {Repo: "r", Exact: []string{"", "src"}, Under: []string{"src"}},
	} {
		q, args := reservedSQL(s)
		plan := explain(t, b, q, args...)
		require.Contains(t, plan, "USING INDEX reservations_prefix (repo=? AND prefix=?)", "%s: %s", name, plan)
		require.NotContains(t, plan, "SCAN reservations", "%s: %s", name, plan)
		if len(s.Under) > 0 {
			require.Contains(t, plan, "USING INDEX reservations_prefix (repo=? AND prefix>? AND prefix<?)", "%s: %s", name, plan)
		}
	}
	plan := explain(t, b, `SELECT `+recordCols+` FROM actions WHERE seq = (`+oldestFor("?1", "?2", "?3")+`)`, "agent:w#00000001", "w", "[]")
	require.Contains(t, plan, "USING INDEX actions_open", plan)
}

// explain returns SQLite's query plan of q, one detail a line.
func explain(t *testing.T, b *Board, q string, args ...any) string {
	t.Helper()
	rows, err := b.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		lines = append(lines, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}
