package hooks

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

// A run file whose port is held by a process other than its bridge (the
// bridge died and someone else took the port) never gets the token: the
// hook checks the listener's owner with the real /proc before it sends.
func TestRun_PortHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	}))
	defer impostor.Close()
	port := impostor.Listener.Addr().(*net.TCPAddr).Port

	// The recorded bridge: alive, but not listening on the port.
	bridge := exec.Command("sleep", "30")
	require.NoError(t, bridge.Start())
	t.Cleanup(func() { bridge.Process.Kill(); bridge.Wait() })

	dir := filepath.Join(t.TempDir(), "run")
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	require.NoError(t, runfile.Write(dir, testClaudePID, runfile.Entry{Port: port, Token: tok, PID: bridge.Process.Pid}))

	out := Run(t.Context(), Config{Bridge: Bridge{RunDir: dir, ClaudePID: testClaudePID}, Timeout: testtime.Bound(5 * time.Second)},
		strings.NewReader(`{"session_id":"s","source":"clear"}`))
	require.Contains(t, out, "not sending the token to port "+strconv.Itoa(port))
	require.Contains(t, out, "not pid "+strconv.Itoa(bridge.Process.Pid)+"'s")
	require.NotContains(t, out, tok)
	select {
	case auth := <-got:
		t.Fatalf("the impostor on the port got a request (Authorization %q)", auth)
	default:
	}
}

// The same goes for a run directory the user does not hold privately: the
// hook refuses it before it reads anything from it.
func TestRun_UnsafeRunDir(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	link := filepath.Join(t.TempDir(), "run")
	require.NoError(t, symlink(f.dir, link))
	cfg := f.config(true, mustNotRetire(t))
	cfg.RunDir = link
	out := Run(t.Context(), cfg, strings.NewReader(`{"source":"clear"}`))
	f.requireLine(t, out)
	require.Contains(t, out, "is a symlink")
}

func symlink(target, link string) error { return exec.Command("ln", "-s", target, link).Run() }
