package main

import (
	"os"
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
		require.ErrorContains(t, err, "no board at postgres://"+pgtest.PasswordRole+"@", "%v", args)
		noPassword(t, out, errOut, err.Error())
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
	require.Regexp(t, `agent:worker#0491068b\s+\d+@`+host+`\s+4241\s+`, out)
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
