package board

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// migrateAsNewer does to the file at path what a newer bee's migration
// would: it changes the schema (with change) and raises the version, in
// one transaction, through a connection of its own.
func migrateAsNewer(t *testing.T, path, change string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("BEGIN IMMEDIATE; %s; PRAGMA user_version = %d; COMMIT", change, schemaVersion+1))
	require.NoError(t, err)
}

func requireNewer(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, ErrNewerSchema)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "upgrade bee")
	require.NotContains(t, err.Error(), ErrNewerSchema.Error(), "the sentinel's words are not said again")
}

// A Board that has the file open when a newer bee migrates it notices at
// its next write, writes nothing, and refuses every later call, reads
// too, saying to upgrade bee.
func TestBoard_NewerSchemaWhileOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	post(t, b, "user:alice", "", "before")
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: 1}))

	migrateAsNewer(t, path, "ALTER TABLE actions ADD COLUMN newer_thing TEXT")
	_, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "after"})
	t.Log(err)
	requireNewer(t, err, path)
	_, err = b.List(t.Context(), "")
	requireNewer(t, err, path)
	require.ErrorIs(t, b.Depart(t.Context(), who), ErrNewerSchema)

	// Nothing was written after the migration.
	var n int
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM actions`).Scan(&n))
	require.Equal(t, 1, n)
	var departed sql.NullInt64
	require.NoError(t, db.QueryRow(`SELECT departed_at FROM members WHERE identity = ?`, string(who)).Scan(&departed))
	require.False(t, departed.Valid, "the refused departure wrote nothing")
}

// A read that no longer fits the schema a newer bee made says so, rather
// than with SQLite's words.
func TestBoard_NewerSchemaOnRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, nil)
	post(t, b, "user:alice", "", "before")
	migrateAsNewer(t, path, "ALTER TABLE actions RENAME COLUMN body TO body_text")
	_, err := b.List(t.Context(), "")
	t.Log(err)
	requireNewer(t, err, path)
}

// BenchmarkWriteVersionCheck measures what the schema version check costs
// a write: a post (one write transaction) with and without it.
//
//	go test -run '^$' -bench WriteVersionCheck -count 5 ./actions/board/
func BenchmarkWriteVersionCheck(b *testing.B) {
	for _, check := range []bool{true, false} {
		b.Run(fmt.Sprintf("check=%v", check), func(b *testing.B) {
			board, err := Open(filepath.Join(b.TempDir(), "board.db"), &Options{noVersionCheck: !check})
			require.NoError(b, err)
			defer board.Close()
			for b.Loop() {
				if _, err := board.Post(b.Context(), "user:bench", actions.Draft{Title: "t"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVersionCheck measures the check alone, inside one write
// transaction.
func BenchmarkVersionCheck(b *testing.B) {
	board, err := Open(filepath.Join(b.TempDir(), "board.db"), nil)
	require.NoError(b, err)
	defer board.Close()
	err = board.write(b.Context(), "bench", func(t wtx) error {
		for b.Loop() {
			if err := t.checkVersion(); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b, err)
}
