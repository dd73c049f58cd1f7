package pgboard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// A database set up by schema 4 (ended actions in bee_actions) opens with
// its ended actions moved to bee_ended_actions, seq and rev kept, and the
// live ones left; every view reads them as before (see
// boardtest.CheckEndedFixture), and an action that ends afterwards moves.
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
	for seq := 1; seq < len(boardtest.EndedFixture); seq++ {
		r := boardtest.EndedFixture[seq]
		col := "reason"
		if r.State == "done" {
			col = "result"
		}
		require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_actions (to_whom, from_whom, title, body, state, holder, `+col+`, ended_by,
				posted_at, claimed_at, ended_at, told_at, rev)
			VALUES ('someone', $1, $2, 'old body', $3, $4, $5, $6, now(),
				CASE WHEN $4 <> '' THEN now() END, CASE WHEN $6 <> '' THEN now() END, CASE WHEN $7 THEN now() END, $8)`,
			boardtest.FixturePoster, fmt.Sprintf("old job %d", seq), r.State, r.Holder, r.Text, r.By, r.Told, 10*seq))
	}
	require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_prerequisites (seq, pre, ord) VALUES (3, 1, 0), (3, 2, 1)`))
	require.NoError(t, c.Exec(ctx, db, `DELETE FROM bee_actions WHERE seq = 7`))
	require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_members (identity, agent, joined_at, renewed_at, lease_until)
		VALUES ($1, 'old', now(), now(), now() + interval '1 hour')`, boardtest.FixtureWorker))

	b := openTest(t, c.URL(db), nil)
	// The tables: ended rows moved, seq and rev kept.
	seqRevs := func(table string) map[int64]int64 {
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
	require.Equal(t, map[int64]int64{2: 20, 3: 30, 6: 60}, seqRevs("bee_actions"))
	require.Equal(t, map[int64]int64{1: 10, 4: 40, 5: 50}, seqRevs("bee_ended_actions"))

	boardtest.CheckEndedFixture(t, b)
	require.Contains(t, seqRevs("bee_ended_actions"), int64(2), "a-2, finished, moved")
	require.NotContains(t, seqRevs("bee_actions"), int64(2))
}
