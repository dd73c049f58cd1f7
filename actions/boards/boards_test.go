package boards

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/actions/pgboard"
	"github.com/tractat-us/bee/internal/pgtest"
)

// requireSaidOnce checks that err's text says phrase once, and what to
// do (hint).
func requireSaidOnce(t *testing.T, err error, phrase, hint string) {
	t.Helper()
	t.Log(err)
	require.Equal(t, 1, strings.Count(strings.ToLower(err.Error()), phrase), "%q said once", phrase)
	require.ErrorContains(t, err, hint)
}

// A database without a board, read with MustExist, says so once, with
// the URL and what to do.
func TestOpen_NoBoardInDatabase(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	_, err := Open(url, &Options{MustExist: true})
	require.ErrorIs(t, err, ErrNoBoard)
	require.ErrorIs(t, err, pgboard.ErrNoBoard)
	requireSaidOnce(t, err, "no board", "check the URL")
	require.ErrorContains(t, err, strings.TrimPrefix(url, "postgres://bee_admin@"))
}

func TestIsRemote(t *testing.T) {
	for loc, want := range map[string]bool{
		"postgres://u@h/db":       true,
		"postgresql://u@h/db":     true,
		"POSTGRES://u@h/db":       true,
		"/home/me/.bee/board.db":  false,
		"board.db":                false,
		"postgres.db":             false,
		"./postgres://not-a-url":  false,
		"sqlite:///home/x/foo.db": false,
		"":                        false,
	} {
		require.Equal(t, want, IsRemote(loc), loc)
	}
}

func TestLocation(t *testing.T) {
	env := map[string]string{EnvLocation: "postgres://u@h/db"}
	loc, err := Location(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "postgres://u@h/db", loc)
	t.Setenv("HOME", "/home/someone")
	t.Setenv(EnvLocation, "")
	loc, err = Location(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "/home/someone/.bee/board.db", loc)
}

func TestOpen_File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	_, err := Open(path, &Options{MustExist: true})
	require.ErrorIs(t, err, ErrNoBoard)
	require.ErrorContains(t, err, path)
	requireSaidOnce(t, err, "no board", "check the path")
	require.NoFileExists(t, path)
	b, err := Open(path, nil)
	require.NoError(t, err)
	require.IsType(t, &board.Board{}, b)
	require.Equal(t, path, b.Location())
	require.NoError(t, b.Close())
	b, err = Open(path, &Options{MustExist: true})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	_, err = Open("", nil)
	require.Error(t, err)
}

// A URL goes to the PostgreSQL board; a server that is not there says so
// (pgboard's own tests cover the rest).
func TestOpen_URL(t *testing.T) {
	_, err := Open("postgres://bee:s3cret-pw@127.0.0.1:1/db?connect_timeout=2", nil)
	require.ErrorIs(t, err, pgboard.ErrUnreachable)
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.ErrorContains(t, err, "postgres://bee@127.0.0.1:1/db")
}
