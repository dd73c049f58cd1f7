package board

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
)

// A board file written by schema 2 (bee before plans) opens, keeps every
// action in every state as it was (priority 2, waiting for nothing), and
// takes blocked actions, priorities and prerequisites at once, on the
// connection that migrated it and on the others; ids are never reused.
func TestBoard_MigratesSchema2(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for v := 1; v <= 2; v++ {
		_, err = db.Exec(migrations[v])
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO meta (key, value) VALUES ('board_id', 'abcd1234')`)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	type row struct {
		state, holder, text, by string
		claimed, ended, told    any
	}
	rows := []row{
		{"open", "", "", "", nil, nil, nil},
		{"claimed", "agent:old#00000001", "", "", now, nil, nil},
		{"done", "agent:old#00000002", "it worked", "agent:old#00000002", now, now, now},
		{"failed", "agent:old#00000002", "no disk", "agent:old#00000002", now, now, nil},
		{"cancelled", "", "not needed", "user:alice", nil, now, now},
		{"open", "", "", "", nil, nil, nil}, // deleted below, so its seq must not come back
	}
	for i, r := range rows {
		col := "reason"
		if r.state == "done" {
			col = "result"
		}
		_, err = db.Exec(`INSERT INTO actions (to_whom, from_whom, title, body, state, holder, `+col+`, ended_by, posted_at,
				claimed_at, done_at, told_at, rev)
			VALUES ('', 'agent:old#00000003', ?, 'old body', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			fmt.Sprintf("old job %d", i+1), r.state, r.holder, r.text, r.by, now, r.claimed, r.ended, r.told, i+1)
		require.NoError(t, err)
	}
	_, err = db.Exec(`DELETE FROM actions WHERE seq = 6`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until) VALUES ('agent:old#00000001', 'old', ?, ?, ?, ?)`,
		os.Getpid(), now, now, now+60_000)
	require.NoError(t, err)
	_, err = db.Exec(`PRAGMA user_version = 2`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	b := openTest(t, path, nil)
	ctx := t.Context()
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 5, "every action kept")
	for i, r := range p.Records {
		want := rows[i]
		require.Equal(t, fmt.Sprintf("a-%d", i+1), r.ID)
		require.Equal(t, fmt.Sprintf("old job %d", i+1), r.Title)
		require.Equal(t, "old body", r.Body)
		require.Equal(t, actions.State(want.state), r.State)
		require.Equal(t, want.holder, r.Holder)
		require.Equal(t, want.by, r.EndedBy)
		require.Equal(t, want.text, r.Result+r.Reason)
		require.Equal(t, actions.DefaultPriority, r.Priority)
		require.Nil(t, r.After)
		require.Nil(t, r.BlockedBy)
	}
	ms, err := b.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1, "members kept")
	var v int
	require.NoError(t, b.db.QueryRow("PRAGMA user_version").Scan(&v))
	require.Equal(t, schemaVersion, v)

	// The loosened CHECKs hold on the migrating connection at once.
	r, err := b.Post(ctx, "user:alice", actions.Draft{Title: "new", After: []string{"a-1"}, Priority: prio(0)})
	require.NoError(t, err)
	require.Equal(t, "a-7", r.ID, "ids are never reused")
	require.Equal(t, actions.Blocked, r.State)
	_, err = b.Post(ctx, "user:alice", actions.Draft{Title: "never", After: []string{"a-4"}})
	require.ErrorIs(t, err, actions.ErrPrerequisiteEnded)
	_, err = b.wconn.ExecContext(ctx, `UPDATE actions SET holder = 'agent:x#00000001' WHERE seq = 7`)
	require.ErrorContains(t, err, "CHECK constraint failed", "a blocked action has no holder")
	_, err = b.wconn.ExecContext(ctx, `UPDATE actions SET state = 'weird' WHERE seq = 7`)
	require.ErrorContains(t, err, "CHECK constraint failed")

	b2 := openTest(t, path, nil) // opening again migrates nothing
	got, err := b2.Get(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)
	var check string
	require.NoError(t, b2.db.QueryRow("PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
}

func prio(p int) *int { return &p }

// The claim stays an index walk with priorities in play: every read of
// actions in Take's statement (and Look's) searches actions_open, and no
// open action is sorted.
func TestBoard_ClaimIsAnIndexWalk(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", nil)
	for i := range 200 {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{To: []string{"", "worker", "other"}[i%3], Title: "t", Priority: prio(i % 5)})
		require.NoError(t, err)
	}
	_, err := b.db.Exec(`ANALYZE`)
	require.NoError(t, err)
	who := boardtest.Mint(t, "worker")
	for name, q := range map[string]string{"take": takeOldest, "look": lookSQL} {
		var args []any
		if name == "take" {
			args = []any{string(who), time.Now().UnixMilli(), who.Agent(), "[]"}
		} else {
			args = []any{string(who), who.Agent(), "[]"}
		}
		rows, err := b.db.Query(`EXPLAIN QUERY PLAN `+q, args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		text := strings.Join(plan, "\n")
		walks := 0
		for _, line := range plan {
			if strings.Contains(line, "actions_open") {
				walks++
			}
			// The claimed action's own prerequisites (at most 64) are
			// ordered as given; nothing else is sorted.
			if strings.Contains(line, "TEMP B-TREE") && !strings.Contains(line, "group_concat") {
				t.Fatalf("%s sorts:\n%s", name, text)
			}
			require.NotRegexp(t, `^SCAN actions\b`, line, "%s scans every action:\n%s", name, text)
		}
		require.GreaterOrEqual(t, walks, 3, "%s walks actions_open once per recipient:\n%s", name, text)
	}
}
