package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/hooks"
	"github.com/tractat-us/bee/internal/loopback/loopbacktest"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

// The real bee-hook, both its hooks, works while local processes without
// the token attack the bridge's control channel (issue 20, point 4): 16
// keep-alive sockets sending refused requests and 200 reconnecting idle
// ones. Before, /clear gave up after its 10 s and the waiter never armed.
func TestBeeHook_UnderAttack(t *testing.T) {
	t.Parallel()
	srv, token, got := retiringBridge(t, &clearctl.Options{Waker: answering(clearctl.WaitResponse{Wake: true, Line: "bee: action a-1 is waiting"})})
	attack := loopbacktest.Attack{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port())),
		Refused: 16, Every: 8 * time.Second,
		Idle: 200,
	}.Start()
	defer func() { t.Logf("attack: %+v", attack.Stop()) }()
	require.Eventually(t, func() bool { return attack.Connects() >= 216 }, testtime.Bound(10*time.Second), time.Millisecond)

	start := time.Now()
	stdout, stderr := clearThroughClaude(t, srv.Port(), token)
	elapsed := time.Since(start)
	require.Empty(t, stdout)
	require.Equal(t, "bee-hook: retired agent:e2e#aaaaaaaa -> agent:e2e#bbbbbbbb\n", stderr)
	require.Len(t, got(), 1)
	require.Less(t, elapsed, hooks.DefaultTimeout, "the /clear hook finished within its own bound")
	t.Logf("/clear under attack: %s", elapsed)

	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, runfile.Write(dir, os.Getpid(), runfile.Entry{Port: srv.Port(), Token: token, PID: os.Getpid()}))
	start = time.Now()
	w := startWaiter(t, dir, "1")
	require.Equal(t, hooks.ExitWake, w.exit(t, hooks.DefaultTimeout), "stderr: %s", w.stderr.String())
	require.Equal(t, "bee: action a-1 is waiting\n", w.stderr.String())
	t.Logf("waiter woken under attack: %s", time.Since(start))
}
