// Package sockowner tells whether a process is the one listening on a
// loopback TCP port, so that bee-hook sends a bridge's token only to that
// bridge and never to whatever else has come to listen on its recorded port
// (the bridge died, and another user's process took the port).
//
// On Linux, [Check] asks the kernel's socket diagnostics (netlink
// sock_diag, as `ss -l` does; /proc/net/tcp and /proc/net/tcp6 when those
// cannot be had) for the sockets listening on the port, and reads
// /proc/<pid>/fd for the process's sockets. It
// can only read the descriptors of the caller's own processes (or any, as
// root), which is what it is for. Elsewhere it cannot tell and returns
// [errors.ErrUnsupported]. A listener can change between Check and a
// connection; Check narrows that window to milliseconds, it does not close
// it.
package sockowner

import "errors"

// Errors Check returns, wrapped with the detail.
var (
	// ErrNotListening: no socket listens on the port.
	ErrNotListening = errors.New("nothing listens on the port")
	// ErrNotOwner: a socket listening on the port belongs to another
	// process (or its owner could not be confirmed).
	ErrNotOwner = errors.New("the port is not the process's")
)
