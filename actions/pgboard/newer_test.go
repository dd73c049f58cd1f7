package pgboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/pgtest"
)

// newerBee is a connection that migrates a board's database as a newer
// bee does (see migrateLocked): the advisory lock first, then the schema
// change and the new version in one transaction, then the unlock.
type newerBee struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// beginNewer takes the migration lock and begins the migration: change
// runs in it, uncommitted.
func beginNewer(t *testing.T, url, change string) *newerBee {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, change)
	require.NoError(t, err)
	return &newerBee{conn: conn, tx: tx}
}

// commit sets the newer version, commits and lets go of the lock.
func (n *newerBee) commit(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	_, err := n.tx.Exec(ctx, fmt.Sprintf(`UPDATE bee_schema_version SET version = %d`, schemaVersion+1))
	require.NoError(t, err)
	require.NoError(t, n.tx.Commit(ctx))
	_, err = n.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrateLock)
	require.NoError(t, err)
}

func requireNewer(t *testing.T, err error, b *Board) {
	t.Helper()
	t.Log(err)
	require.ErrorIs(t, err, ErrNewerSchema)
	require.ErrorContains(t, err, b.location)
	require.ErrorContains(t, err, "upgrade bee")
	require.NotContains(t, err.Error(), ErrNewerSchema.Error(), "the sentinel's words are not said again")
}

func countActions(t *testing.T, b *Board) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM bee_actions`).Scan(&n))
	return n
}

// A Board open when a newer bee migrates the database notices at its
// next write, writes nothing, and refuses every later call.
func TestBoard_NewerSchemaWhileOpen(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	post(t, b, "before")
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: 1}))

	beginNewer(t, url, `ALTER TABLE bee_actions ADD COLUMN newer_thing text`).commit(t)
	_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "after"})
	requireNewer(t, err, b)
	_, err = b.List(t.Context(), "")
	requireNewer(t, err, b)
	require.ErrorIs(t, b.Depart(t.Context(), who), ErrNewerSchema)
	require.Equal(t, 1, countActions(t, b), "nothing written after the migration")
	var departed *time.Time
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT departed_at FROM bee_members WHERE identity = $1`, string(who)).Scan(&departed))
	require.Nil(t, departed, "the refused departure wrote nothing")
}

// A write that begins while a newer bee migrates waits for the migration
// and is then refused: it never writes through the schema being changed.
func TestBoard_NewerSchemaDuringWrite(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	post(t, b, "before")

	newer := beginNewer(t, url, `ALTER TABLE bee_members ADD COLUMN newer_thing text`)
	done := make(chan error, 1)
	go func() {
		_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "during"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the write ran during the migration: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	newer.commit(t)
	select {
	case err := <-done:
		requireNewer(t, err, b)
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not end once the migration had")
	}
	require.Equal(t, 1, countActions(t, b), "nothing written")
}

// A write's first statement goes to the server with the version check
// (see pipeTx), so it runs on the newer schema before the check's answer
// is read: when it fails there, the write still says that a newer bee
// migrated the database, and when it succeeds, it is rolled back.
func TestBoard_NewerSchemaFirstStatement(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	who := mint(t, "w")
	claim := func() actions.Record {
		t.Helper()
		post(t, b, "job")
		p, err := b.Next(t.Context(), who, "", 0)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		return p.Records[0]
	}
	first := claim()
	_, err := b.Finish(t.Context(), who, first.ID, "done") // the end's statement prepared
	require.NoError(t, err)
	r := claim()

	beginNewer(t, url, `ALTER TABLE bee_ended_actions RENAME COLUMN result TO outcome`).commit(t)
	_, err = b.Finish(t.Context(), who, r.ID, "done") // its first statement names result
	requireNewer(t, err, b)
	var state string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT state FROM bee_actions WHERE seq = $1`, r.Seq).Scan(&state))
	require.Equal(t, "claimed", state, "the refused end wrote nothing")
}

// A read that no longer fits the schema a newer bee made says so, rather
// than with the server's words.
func TestBoard_NewerSchemaOnRead(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	post(t, b, "before")
	beginNewer(t, url, `ALTER VIEW bee_every_action RENAME COLUMN body TO body_text`).commit(t)
	_, err := b.List(t.Context(), "")
	requireNewer(t, err, b)
}

// BenchmarkWriteVersionCheck measures what the schema version check costs
// a write (a post) on a server on this machine, with and without it.
//
//	go test -run '^$' -bench WriteVersionCheck -count 5 ./actions/pgboard/
func BenchmarkWriteVersionCheck(b *testing.B) {
	c := pgtest.Shared(b)
	for _, check := range []bool{true, false} {
		b.Run(fmt.Sprintf("check=%v", check), func(b *testing.B) {
			board := openTest(b, c.URL(c.NewDB(b)), &Options{noVersionCheck: !check})
			for b.Loop() {
				if _, err := board.Post(b.Context(), "user:bench", actions.Draft{Title: "t"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
