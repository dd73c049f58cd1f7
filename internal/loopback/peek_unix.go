//go:build unix

package loopback

import (
	"net"
	"syscall"
)

// readable reports whether bytes are already waiting on c, without reading
// them and without blocking: a client that sent its request right after
// connecting is talking from the moment it is accepted. It uses Control,
// not Read, on the raw connection: Read would wait for the read lock that
// the connection's serving goroutine holds while it waits for bytes.
func readable(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	n := 0
	_ = raw.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}
