package pgboard

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/internal/pgtest"
)

// A database set up by schema 1 (before reservations) is migrated, keeps
// every action as it was (no paths, held back by nothing), and takes
// reservations and actions with paths.
func TestBoard_MigratesSchema1(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	ctx := t.Context()
	for _, q := range []string{
		`CREATE TABLE bee_schema_version (version integer NOT NULL)`,
		`INSERT INTO bee_schema_version (version) VALUES (1)`,
		migrations[1],
		`INSERT INTO bee_meta (key, value) VALUES ('board_id', 'abcd1234')`,
		`INSERT INTO bee_actions (from_whom, title, state, posted_at, rev) VALUES ('user:alice', 'old open', 'open', now(), 1)`,
		`INSERT INTO bee_actions (from_whom, title, state, holder, ended_by, posted_at, ended_at, rev)
			VALUES ('user:alice', 'old done', 'done', 'agent:old#00000001', 'agent:old#00000001', now(), now(), 1)`,
	} {
		require.NoError(t, c.Exec(ctx, db, q))
	}
	b := openTest(t, c.URL(db), nil)
	p, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, p.Records, 2, "every action kept")
	require.Equal(t, "old open", p.Records[0].Title)
	require.Equal(t, actions.Done, p.Records[1].State)
	for _, r := range p.Records {
		require.Empty(t, r.Repo)
		require.Nil(t, r.Paths)
	}
	w := boardtest.Mint(t, "w")
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid()}))
	_, err = b.Reserve(ctx, "user:alice", actions.ReserveRequest{Repo: "r", Patterns: []string{"src"}})
	require.NoError(t, err)
	held, err := b.Post(ctx, "user:alice", actions.Draft{Title: "new", Repo: "r", Paths: []string{"src/x"}})
	require.NoError(t, err)
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
}

// With 10,000 reservations the guard's lookup and a grant's are index
// scans of (repo, prefix), not scans of the table.
func TestBoard_ReservationReadsUseTheIndex(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	b := openTest(t, c.URL(db), nil)
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, db, `INSERT INTO bee_reservations (res, repo, holder, pattern, prefix, exclusive, created)
		SELECT n, 'r', 'user:alice', 'pkg/' || n || '/**', 'pkg/' || n, true, now() FROM generate_series(1, 10000) n`))
	require.NoError(t, c.Exec(ctx, db, `ANALYZE bee_reservations`))
	for name, s := range map[string]engine.Scope{
		"conflicts": {Repo: "r", Exact: []string{"", "pkg", "pkg/77", "pkg/77/a.go"}},
		"grant":     {Repo: "r", Exact: []string{"", "pkg", "pkg/77"}, Under: []string{"pkg/77"}},
	} {
		q, args := reservedSQL(s)
		rows, err := b.pool.Query(ctx, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		require.Contains(t, plan, "bee_reservations_prefix", "%s:\n%s", name, plan)
		require.NotContains(t, plan, "Seq Scan on bee_reservations", "%s:\n%s", name, plan)
	}
}

// A role with nothing but SELECT, INSERT, UPDATE and DELETE on bee's
// tables (see the schema's doc) reserves, and claims an action with
// paths.
func TestBoard_ReservationsWithTablePrivilegesOnly(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	if !c.Owned() {
		t.Skip("needs the password role of a cluster the test started")
	}
	db := c.NewDB(t)
	owner := openTest(t, c.URL(db), nil)
	require.NoError(t, owner.Close())
	require.NoError(t, c.Exec(t.Context(), db, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+pgtest.PasswordRole))
	b := openTest(t, c.URLFor(db, pgtest.PasswordRole, c.Password, ""), nil)
	ctx := t.Context()
	w := boardtest.Mint(t, "w")
	require.NoError(t, b.Join(ctx, actions.Member{ID: w, PID: os.Getpid()}))
	_, err := b.Reserve(ctx, actions.Agent(w), actions.ReserveRequest{Repo: "r", Patterns: []string{"docs"}})
	require.NoError(t, err)
	job, err := b.Post(ctx, "user:alice", actions.Draft{Title: "job", Repo: "r", Paths: []string{"src"}})
	require.NoError(t, err)
	got, err := b.Next(ctx, w, "", 0)
	require.NoError(t, err)
	require.Len(t, got.Records, 1)
	require.Equal(t, job.ID, got.Records[0].ID)
	rs, err := b.Reservations(ctx, "r")
	require.NoError(t, err)
	require.Len(t, rs, 2)
}
