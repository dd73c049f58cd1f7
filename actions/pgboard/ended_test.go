package pgboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// A database set up by schema 4 (ended actions in bee_actions) opens with
// its ended actions moved to bee_ended_actions, seq and rev kept, and the
// live ones left; every view reads them as before, an outcome nobody was
// told of is still told, a blocked action whose prerequisite ended done
// before the migration opens when its other one ends, and no seq comes
// back.
func TestOpen_MigratesSchema4(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	ctx := t.Context()
	for v := 1; v <= 4; v++ {
		require.NoError(t, c.Exec(ctx, db, migrations[v]), "schema %d", v)
	}
	require.NoError(t, c.Exec(ctx, db, `CREATE TABLE bee_schema_version (version integer NOT NULL);
		INSERT INTO bee_schema_version (version) VALUES (4);
		INSERT INTO bee_meta (key, value) VALUES ('board_id', 'abcd1234')`))
	const poster, worker = "agent:old#00000003", "agent:old#00000001"
	type row struct{ state, holder, text, by string }
	rows := []row{
		1: {"done", worker, "it worked", worker}, // nobody told
		2: {"claimed", worker, "", ""},
		3: {"blocked", "", "", ""}, // waits for 1 (done) and 2
		4: {"failed", worker, "no disk", worker},
		5: {"cancelled", "", "not needed", "user:alice"},
		6: {"open", "", "", ""},
		7: {"done", worker, "gone", worker}, // deleted below: its seq must not come back
	}
	for i := 1; i < len(rows); i++ {
		r := rows[i]
		col := "reason"
		if r.state == "done" {
			col = "result"
		}
		require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_actions (to_whom, from_whom, title, body, state, holder, `+col+`, ended_by,
				posted_at, claimed_at, ended_at, told_at, rev)
			VALUES ('someone', $1, $2, 'old body', $3, $4, $5, $6, now(),
				CASE WHEN $4 <> '' THEN now() END, CASE WHEN $6 <> '' THEN now() END,
				CASE WHEN $6 <> '' AND $7 <> 1 THEN now() END, $7 * 10)`,
			poster, fmt.Sprintf("old job %d", i), r.state, r.holder, r.text, r.by, i))
	}
	require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_prerequisites (seq, pre, ord) VALUES (3, 1, 0), (3, 2, 1)`))
	require.NoError(t, c.Exec(ctx, db, `DELETE FROM bee_actions WHERE seq = 7`))
	require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_members (identity, agent, joined_at, renewed_at, lease_until)
		VALUES ($1, 'old', now(), now(), now() + interval '1 hour')`, worker))

	b := openTest(t, c.URL(db), nil)

	// The tables: ended rows moved, seq and rev kept.
	tableOf := func(table string) map[int64]int64 {
		t.Helper()
		got := map[int64]int64{}
		rs, err := b.pool.Query(ctx, `SELECT seq, rev FROM `+table)
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
	require.Equal(t, map[int64]int64{2: 20, 3: 30, 6: 60}, tableOf("bee_actions"))
	require.Equal(t, map[int64]int64{1: 10, 4: 40, 5: 50}, tableOf("bee_ended_actions"))

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
	require.Contains(t, tableOf("bee_ended_actions"), int64(2))
	require.NotContains(t, tableOf("bee_actions"), int64(2))

	// No seq comes back.
	rec, err := b.Post(ctx, actions.Agent(boardtest.Mint(t, "new")), actions.Draft{Title: "new"})
	require.NoError(t, err)
	require.Equal(t, "a-8", rec.ID)
}
