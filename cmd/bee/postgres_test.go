package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pgboard"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
)

// bee works the same against a board on PostgreSQL, named by a URL, and
// never shows the URL's password.
func TestMain_OnPostgres(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	if !c.Owned() {
		t.Skip("needs the password role of a cluster started by the test") // the external server's roles are unknown
	}
	url := c.URLFor(c.NewDBFor(t, pgtest.PasswordRole), pgtest.PasswordRole, c.Password, "")
	noPassword := func(t *testing.T, texts ...string) {
		t.Helper()
		for _, s := range texts {
			require.NotContains(t, s, c.Password)
		}
	}

	// Reading a database that holds no board is an error, not an empty
	// board, and creates nothing.
	for _, args := range [][]string{{"list"}, {"agents"}} {
		out, errOut, err := run(t, url, "", args...)
		require.ErrorContains(t, err, "no board in the database postgres://"+pgtest.PasswordRole+"@", "%v", args)
		require.Equal(t, exitNo, exitOf(err))
		noPassword(t, out, errOut, err.Error())
	}

	// Text the board cannot keep is refused as on the file board, in
	// words, before it reaches the server (which refuses a NUL raw).
	for args, want := range map[[2]string]string{
		{"nul\x00title", ""}: "bee post: title holds the control character U+0000; a title is plain text",
		{"bell\a", ""}:       "bee post: title holds the control character U+0007; a title is plain text",
		{"t", "nul\x00body"}: "bee post: body holds a NUL character",
	} {
		_, _, err := run(t, url, "", "post", args[0], args[1])
		require.EqualError(t, err, want)
		require.ErrorIs(t, err, actions.ErrBadText)
		require.Equal(t, exitUsage, exitOf(err))
	}

	out := bee(t, url, "post", "--to", "worker", "build it")
	require.Equal(t, "posted a-1 for worker: build it\n", out)
	out = bee(t, url, "list")
	require.Regexp(t, `a-1\s+open\s+worker\s+user:tester`, out)
	noPassword(t, out)

	require.Contains(t, bee(t, url, "agents"), "no live agents on postgres://"+pgtest.PasswordRole+"@127.0.0.1:")
	b, err := pgboard.Open(url, nil)
	require.NoError(t, err)
	defer b.Close()
	who := identity.ID("agent:worker#0491068b")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid(), ClaudePID: 4241}))
	p, err := b.Next(t.Context(), who, "", 5*time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	out = bee(t, url, "agents")
	host, _ := os.Hostname()
	require.Regexp(t, `agent:worker#0491068b\s+-\s+\d+@`+host+`\s+4241\s+`, out)
	require.Contains(t, out, "a-1")
	noPassword(t, out)
	out = bee(t, url, "show", "a-1")
	require.Contains(t, out, string(who))

	// A wrong password: a clear error that names the role, not the password.
	wrong := strings.Replace(url, c.Password, "not-the-password", 1)
	_, errOut, err := run(t, wrong, "", "list")
	require.ErrorIs(t, err, pgboard.ErrLogin)
	require.ErrorContains(t, err, `refused role "`+pgtest.PasswordRole+`"`)
	require.NotContains(t, err.Error(), "not-the-password")
	noPassword(t, errOut, err.Error())
}

// The README's backup of a board on PostgreSQL works as written: bee
// backup refuses it and names pg_dump; pg_dump --table='bee_*' of the
// board, restored with psql into an empty database, is the same board.
func TestMain_PostgresBackupWithPgDump(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	binDir, err := pgtest.FindBin()
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	for _, tool := range []string{"pg_dump", "psql"} {
		if _, err := os.Stat(filepath.Join(binDir, tool)); err != nil {
			pgtest.Unavailable(t, fmt.Errorf("no %s next to initdb: %w", tool, err))
		}
	}
	from, to := c.URL(c.NewDB(t)), c.URL(c.NewDB(t))
	bee(t, from, "post", "--to", "worker", "kept", "its body")
	bee(t, from, "post", "cancelled one")
	bee(t, from, "cancel", "a-2", "--reason", "not needed")

	_, _, err = run(t, from, "", "backup", filepath.Join(t.TempDir(), "copy.db"))
	requireUsage(t, err, "the board is on PostgreSQL")
	var msg bytes.Buffer
	exitCode(err, &msg)
	require.Contains(t, msg.String(), "Try: pg_dump --table='bee_*'")

	dump, err := exec.CommandContext(t.Context(), filepath.Join(binDir, "pg_dump"), "--table=bee_*", from).Output()
	require.NoError(t, err)
	psql := exec.CommandContext(t.Context(), filepath.Join(binDir, "psql"), "-q", "-v", "ON_ERROR_STOP=1", to)
	psql.Stdin = bytes.NewReader(dump)
	out, err := psql.CombinedOutput()
	require.NoError(t, err, "%s", out)

	require.Equal(t, bee(t, from, "list", "--all", "--json"), bee(t, to, "list", "--all", "--json"))
	require.Contains(t, bee(t, to, "post", "after the restore"), "posted a-3", "the restored board goes on")
}
