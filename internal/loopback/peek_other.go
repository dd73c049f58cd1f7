//go:build !unix

package loopback

import "net"

// readable reports false: off unix, a connection talks from its first read.
func readable(net.Conn) bool { return false }
