package pgtest

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// A started cluster takes connections, gives each test its own database,
// trusts the admin and asks PasswordRole for its password.
func TestShared(t *testing.T) {
	c := Shared(t)
	db := c.NewDB(t)
	conn, err := pgx.Connect(t.Context(), c.URL(db))
	require.NoError(t, err)
	var name string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
	require.Equal(t, db, name)
	require.NoError(t, conn.Close(t.Context()))
	if !c.Owned() {
		return
	}
	conn, err = pgx.Connect(t.Context(), c.URLFor(db, PasswordRole, c.Password, ""))
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	_, err = pgx.Connect(t.Context(), c.URLFor(db, PasswordRole, "wrong", ""))
	require.ErrorContains(t, err, "password authentication failed")

	// A restart keeps the data.
	require.NoError(t, c.Restart())
	conn, err = pgx.Connect(t.Context(), c.URL(db))
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
}

// A database a finished test gave back is handed out again as a new one
// would be: no schema or table of the test's, the public schema owned by
// the database's owner, who may create tables in it.
func TestCluster_NewDBReusedEmpty(t *testing.T) {
	c := Shared(t)
	if !c.Owned() {
		t.Skip("an external server's databases are dropped, not reused")
	}
	// schemas describes a database's schemas, their owners, rights and
	// comments, and counts what the public schema holds.
	schemas := func(db string) (desc []string, inPublic int) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), c.URL(db))
		require.NoError(t, err)
		defer conn.Close(t.Context())
		rows, err := conn.Query(t.Context(), `SELECT nspname || ' ' || nspowner::regrole || ' ' || coalesce(nspacl::text, '-') || ' ' ||
			coalesce(obj_description(oid, 'pg_namespace'), '-') FROM pg_namespace ORDER BY nspname`)
		require.NoError(t, err)
		desc, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&inPublic))
		return desc, inPublic
	}
	for _, role := range []string{"", PasswordRole} {
		var used string
		t.Run("use "+role, func(t *testing.T) {
			used = c.NewDBFor(t, role)
			url := c.URL(used)
			if role != "" {
				url = c.URLFor(used, role, c.Password, "")
			}
			conn, err := pgx.Connect(t.Context(), url)
			require.NoError(t, err)
			defer conn.Close(t.Context())
			for _, sql := range []string{`CREATE TABLE bee_actions (x int)`, `CREATE SCHEMA bee`, `CREATE TABLE bee.t (x serial)`} {
				_, err := conn.Exec(t.Context(), sql)
				require.NoError(t, err, sql)
			}
		})
		t.Run("again "+role, func(t *testing.T) {
			again := c.NewDBFor(t, role)
			require.Equal(t, used, again, "handed out again")
			fresh := "bee_test_fresh_" + randHex(4)
			create := "CREATE DATABASE " + fresh
			if role != "" {
				create += " OWNER " + role
			}
			require.NoError(t, c.Exec(t.Context(), "postgres", create))
			defer func() { require.NoError(t, c.Exec(t.Context(), "postgres", "DROP DATABASE "+fresh)) }()
			want, _ := schemas(fresh)
			got, n := schemas(again)
			require.Equal(t, want, got)
			require.Zero(t, n, "nothing left in public")
			if role != "" {
				conn, err := pgx.Connect(t.Context(), c.URLFor(again, role, c.Password, ""))
				require.NoError(t, err)
				defer conn.Close(t.Context())
				_, err = conn.Exec(t.Context(), `CREATE TABLE bee_actions (x int)`)
				require.NoError(t, err, "the owner creates tables in public")
			}
		})
	}
}

// A durable cluster flushes every commit, as users run PostgreSQL; the
// test cluster does not.
func TestSharedDurable(t *testing.T) {
	if os.Getenv(EnvURL) != "" {
		t.Skip("an external server's settings are its own")
	}
	settings := func(c *Cluster) []string {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
		require.NoError(t, err)
		defer conn.Close(t.Context())
		var fsync, sync, fpw string
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
			current_setting('full_page_writes')`).Scan(&fsync, &sync, &fpw))
		return []string{fsync, sync, fpw}
	}
	require.Equal(t, []string{"on", "on", "on"}, settings(SharedDurable(t)))
	require.Equal(t, []string{"off", "off", "off"}, settings(Shared(t)))
}
