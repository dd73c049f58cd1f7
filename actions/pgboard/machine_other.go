//go:build !linux

package pgboard

import (
	"errors"
	"net"
)

// Off Linux there is no machine's claimer or listener (see
// machine_linux.go): every Board claims and listens on its own
// connections.

var errMachineTaken = errors.New("the machine's socket is taken")

func machineSocket(kind, hostKey, location, id string) string { return "" }

func listenMachine(string) (*net.UnixListener, error) { return nil, errors.ErrUnsupported }

func dialMachine(string) (*net.UnixConn, error) { return nil, errors.ErrUnsupported }

func peerIsUs(*net.UnixConn) bool { return false }
