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
