//go:build linux

package sockowner

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func listen(t *testing.T, network, addr string) int {
	t.Helper()
	ln, err := net.Listen(network, addr)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestCheck_OwnListener(t *testing.T) {
	port := listen(t, "tcp4", "127.0.0.1:0")
	require.NoError(t, Check(os.Getpid(), port))
}

func TestCheck_NothingListens(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	require.ErrorIs(t, Check(os.Getpid(), port), ErrNotListening)
}

// A port held by another process is refused, whoever is named.
func TestCheck_AnotherProcessListens(t *testing.T) {
	port := listen(t, "tcp4", "127.0.0.1:0")
	other := exec.Command("sleep", "30")
	require.NoError(t, other.Start())
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	err := Check(other.Process.Pid, port)
	require.ErrorIs(t, err, ErrNotOwner)
	require.Contains(t, err.Error(), strconv.Itoa(other.Process.Pid))
}

// A second listener on the same port (IPv6, another process's in real
// life) makes the port not the process's alone.
func TestCheck_ListenerOnIPv6Too(t *testing.T) {
	port := listen(t, "tcp4", "127.0.0.1:0")
	ln6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(port))
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln6.Close()
	require.NoError(t, Check(os.Getpid(), port), "both listeners are this process's")
}

func TestCheck_DeadProcess(t *testing.T) {
	port := listen(t, "tcp4", "127.0.0.1:0")
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.ErrorIs(t, Check(dead.Process.Pid, port), ErrNotOwner)
}

func TestCheck_BadArguments(t *testing.T) {
	require.Error(t, Check(0, 80))
	require.Error(t, Check(1, 0))
	require.Error(t, Check(1, 70000))
}

// The table parser on a fixed /proc: state, port and header handled.
func TestListeners(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tcp")
	require.NoError(t, os.WriteFile(path, []byte(
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+
			"   0: 0100007F:A0BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n"+
			"   1: 0100007F:A0BB 0100007F:D2C8 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n"+
			"   2: 00000000:A0BC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0\n"),
		0o600))
	got, err := listeners(path, 0xA0BB)
	require.NoError(t, err)
	require.Equal(t, []string{"111"}, got, "only the listening socket, not the connection")
	got, err = listeners(path, 0xA0BC)
	require.NoError(t, err)
	require.Equal(t, []string{"333"}, got)
}

// The socket diagnostics and /proc/net/tcp agree on who listens where:
// IPv4 and IPv6 listeners on one port, none on a closed one, and an
// established connection's sockets are not listeners.
func TestListenersDiag_AgreesWithProc(t *testing.T) {
	port := listen(t, "tcp4", "127.0.0.1:0")
	ports := []int{port}
	if ln6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(port)); err == nil {
		t.Cleanup(func() { ln6.Close() })
	}
	c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ports = append(ports, c.LocalAddr().(*net.TCPAddr).Port) // a port with a socket, but no listener

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	ports = append(ports, closed)

	for _, p := range ports {
		diag, err := listenersDiag(p)
		require.NoError(t, err)
		proc, err := listenersProc(p)
		require.NoError(t, err)
		require.ElementsMatch(t, proc, diag, "port %d", p)
	}
	diag, err := listenersDiag(port)
	require.NoError(t, err)
	require.NotEmpty(t, diag)
}

// BenchmarkCheck is what the check adds to a hook: the listeners from the
// socket diagnostics (what Check uses) beside /proc/net/tcp{,6} (its
// fallback), on however many sockets this machine has, and the whole
// Check, the bridge's descriptors included.
//
//	go test -run '^$' -bench Check ./internal/sockowner/
func BenchmarkCheck(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	b.Run("diag", func(b *testing.B) {
		for b.Loop() {
			if _, err := listenersDiag(port); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			if _, err := listenersProc(port); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Check", func(b *testing.B) {
		for b.Loop() {
			if err := Check(os.Getpid(), port); err != nil {
				b.Fatal(err)
			}
		}
	})
}
