//go:build !linux

package pgboard

import (
	"errors"
	"net"
)

// Off Linux there is no machine's claimer (see machine_linux.go): every
// Board claims on its own connections.

var errMachineTaken = errors.New("the machine's claimer socket is taken")

func machineSocket(hostKey, location, id string) string { return "" }

func listenMachine(string) (*net.UnixListener, error) { return nil, errors.ErrUnsupported }

func dialMachine(string) (*net.UnixConn, error) { return nil, errors.ErrUnsupported }

func peerIsUs(*net.UnixConn) bool { return false }
