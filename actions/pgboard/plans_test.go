package pgboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

func prio(p int) *int { return &p }

// A database set up by schema 1 (bee before plans) opens, keeps every
// action in every state as it was (priority 2, waiting for nothing), and
// takes blocked actions, priorities and prerequisites; ids are never
// reused.
func TestOpen_MigratesSchema1(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, db, migrations[1]))
	require.NoError(t, c.Exec(ctx, db, `CREATE TABLE bee_schema_version (version integer NOT NULL);
		INSERT INTO bee_schema_version (version) VALUES (1);
		INSERT INTO bee_meta (key, value) VALUES ('board_id', 'abcd1234')`))
	type row struct{ state, holder, result, reason, by string }
	rows := []row{
		{"open", "", "", "", ""},
		{"claimed", "agent:old#00000001", "", "", ""},
		{"done", "agent:old#00000002", "it worked", "", "agent:old#00000002"},
		{"failed", "agent:old#00000002", "", "no disk", "agent:old#00000002"},
		{"cancelled", "", "", "not needed", "user:alice"},
		{"open", "", "", "", ""}, // deleted below, so its seq must not come back
	}
	for i, r := range rows {
		require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_actions (to_whom, from_whom, title, body, state, holder, result, reason, ended_by,
				posted_at, claimed_at, ended_at, told_at, rev)
			VALUES ('', 'agent:old#00000003', $1, 'old body', $2, $3, $4, $5, $6, now(),
				CASE WHEN $3 <> '' THEN now() END, CASE WHEN $6 <> '' THEN now() END, CASE WHEN $6 <> '' THEN now() END, 1)`,
			fmt.Sprintf("old job %d", i+1), r.state, r.holder, r.result, r.reason, r.by))
	}
	require.NoError(t, c.Exec(ctx, db, `DELETE FROM bee_actions WHERE seq = 6`))

	b := openTest(t, c.URL(db), nil)
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 5, "every action kept")
	for i, r := range p.Records {
		want := rows[i]
		require.Equal(t, fmt.Sprintf("a-%d", i+1), r.ID)
		require.Equal(t, fmt.Sprintf("old job %d", i+1), r.Title)
		require.Equal(t, actions.State(want.state), r.State)
		require.Equal(t, want.holder, r.Holder)
		require.Equal(t, want.result, r.Result)
		require.Equal(t, want.reason, r.Reason)
		require.Equal(t, want.by, r.EndedBy)
		require.Equal(t, actions.DefaultPriority, r.Priority)
		require.Nil(t, r.After)
		require.Nil(t, r.BlockedBy)
	}
	r, err := b.Post(ctx, "user:alice", actions.Draft{Title: "new", After: []string{"a-1"}, Priority: prio(0)})
	require.NoError(t, err)
	require.Equal(t, "a-7", r.ID, "ids are never reused")
	require.Equal(t, actions.Blocked, r.State)
	require.Error(t, c.Exec(ctx, db, `UPDATE bee_actions SET holder = 'agent:x#00000001' WHERE seq = 7`), "a blocked action has no holder")
	require.Error(t, c.Exec(ctx, db, `UPDATE bee_actions SET priority = 5 WHERE seq = 7`))
	var v int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT version FROM bee_schema_version`).Scan(&v))
	require.Equal(t, schemaVersion, v)
}

// The claim stays an index walk with priorities in play: Take's
// statement walks bee_actions_open in (priority, seq) order and sorts
// nothing, with the settings it runs under.
func TestBoard_ClaimIsAnIndexWalk(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", nil)
	ctx := t.Context()
	for i := range 300 {
		_, err := b.Post(ctx, "user:alice", actions.Draft{To: []string{"", "worker", "other"}[i%3], Title: "t", Priority: prio(i % 5)})
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(ctx, `ANALYZE bee_actions`)
	require.NoError(t, err)
	who := boardtest.Mint(t, "worker")
	var plan []string
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN `+takeSQL, string(who), []string{"", who.Agent(), string(who)}, []int64{}, nil)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	// The walk is CTE c, up to the next node at its depth; what follows
	// reads the one action claimed (its prerequisites, at most 64, are
	// ordered as given).
	var walk []string
	for i, line := range plan {
		if strings.TrimSpace(line) == "CTE c" {
			for _, l := range plan[i+1:] {
				if !strings.HasPrefix(l, "    ") {
					break
				}
				walk = append(walk, l)
			}
		}
	}
	require.NotEmpty(t, walk, text)
	require.Contains(t, strings.Join(walk, "\n"), "Index Scan using bee_actions_open", text)
	require.NotContains(t, strings.Join(walk, "\n"), "Sort", text)
}

// A plan of 1,000 actions, inserted in one statement, gets its seqs in
// the order given (Insert relies on it, and refuses otherwise), each
// waiting for the first and the one before.
func TestBoard_PlanOfAThousand(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", nil)
	ctx := t.Context()
	plan := make([]actions.PlanEntry, actions.MaxPlan)
	for i := range plan {
		plan[i] = actions.PlanEntry{Key: fmt.Sprintf("k%d", i), Title: fmt.Sprintf("step %d", i)}
		if i > 0 {
			plan[i].After = []string{"k0", fmt.Sprintf("k%d", i-1)}
		}
	}
	start := time.Now()
	got, err := b.PostPlan(ctx, "user:alice", plan)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second)
	require.Len(t, got.Records, actions.MaxPlan)
	require.Equal(t, actions.Open, got.Records[0].State)
	for i, r := range got.Records[1:] {
		require.Equal(t, actions.Blocked, r.State)
		require.Equal(t, got.Records[i].Seq+1, r.Seq, "posted in order")
	}
}
