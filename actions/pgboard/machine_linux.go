package pgboard

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The machine's claimer and its listener each listen on an abstract unix socket: no file to
// leave behind when its process dies (the kernel frees the name), and the
// one bind that succeeds is the election. An abstract socket has no
// permissions, so each end checks that the other runs as the same user
// (SO_PEERCRED), and the name carries the user, the machine's key (a
// network namespace has its own abstract names), the board and bee's
// schema version, so that only Boards that claim alike meet.

// errMachineTaken: another process serves as the machine's claimer (or
// listener).
var errMachineTaken = errors.New("the machine's socket is taken")

// machineSocket is the name of the machine's socket of kind ("pgclaim":
// the claimer; "pglisten": the listener, see relay.go) for the board with
// id at location, on the machine hostKey; "" where there is none.
func machineSocket(kind, hostKey, location, id string) string {
	sum := sha256.Sum256([]byte(hostKey + "\x00" + location + "\x00" + id))
	return fmt.Sprintf("@bee-%s-v%d-%d-%x", kind, schemaVersion, os.Getuid(), sum[:12])
}

func listenMachine(name string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, errMachineTaken
	}
	return ln, err
}

func dialMachine(name string) (*net.UnixConn, error) {
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: name, Net: "unix"})
}

// peerIsUs reports whether the process at c's other end runs as this
// process's user.
func peerIsUs(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return cerr == nil && err == nil && int(cred.Uid) == os.Getuid()
}
