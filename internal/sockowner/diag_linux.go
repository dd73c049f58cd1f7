//go:build linux

package sockowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reading /proc/net/tcp makes the kernel walk every TCP socket of the
// machine, established ones included, a page at a time: milliseconds on a
// busy machine, and more than all the rest of an edit guard's work. The
// kernel's socket diagnostics (NETLINK_SOCK_DIAG, what `ss -l` uses) list
// the listening sockets alone. listenersDiag asks them; Check falls back on
// /proc/net/tcp when they cannot be had (netlink refused, or a kernel
// without inet_diag).

// Sizes and offsets of the kernel's inet_diag structures
// (linux/inet_diag.h), which golang.org/x/sys/unix does not define.
const (
	tcpListenState  = 10 // TCP_LISTEN
	inetDiagSockID  = 48 // struct inet_diag_sockid
	inetDiagReqLen  = 8 + inetDiagSockID
	inetDiagMsgLen  = 4 + inetDiagSockID + 20
	inetDiagSportAt = 4                       // inet_diag_msg.id.idiag_sport, big-endian
	inetDiagInodeAt = 4 + inetDiagSockID + 16 // inet_diag_msg.idiag_inode
)

// errDiagUnavailable wraps why the socket diagnostics could not be had.
var errDiagUnavailable = errors.New("socket diagnostics unavailable")

// listenersDiag returns the inodes of the TCP sockets (IPv4 and IPv6)
// listening on port, from the kernel's socket diagnostics.
func listenersDiag(port int) ([]string, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDiagUnavailable, err)
	}
	defer unix.Close(fd)
	// Answers beyond this wait are the kernel's, which answers a dump at
	// once; a stuck socket must not hold the hook up.
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("%w: %w", errDiagUnavailable, err)
	}
	var inodes []string
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		found, err := dumpListeners(fd, uint32(seq+1), family, port)
		if err != nil {
			return nil, err
		}
		inodes = append(inodes, found...)
	}
	return inodes, nil
}

// dumpListeners asks for the listening TCP sockets of family and returns
// the inodes of those on port.
func dumpListeners(fd int, seq uint32, family uint8, port int) ([]string, error) {
	req := make([]byte, unix.NLMSG_HDRLEN+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	body := req[unix.NLMSG_HDRLEN:]
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	ne.PutUint32(body[4:], 1<<tcpListenState) // idiag_states: LISTEN only
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("%w: %w", errDiagUnavailable, err)
	}
	want := strconv.Itoa(port)
	var inodes []string
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errDiagUnavailable, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errDiagUnavailable, err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return inodes, nil
			case unix.NLMSG_ERROR:
				errno := syscall.Errno(0)
				if len(m.Data) >= 4 {
					errno = syscall.Errno(-int32(ne.Uint32(m.Data)))
				}
				return nil, fmt.Errorf("%w: %w", errDiagUnavailable, errno)
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(m.Data) < inetDiagMsgLen {
					return nil, fmt.Errorf("%w: an answer of %d bytes", errDiagUnavailable, len(m.Data))
				}
				if strconv.Itoa(int(binary.BigEndian.Uint16(m.Data[inetDiagSportAt:]))) == want {
					inodes = append(inodes, strconv.FormatUint(uint64(ne.Uint32(m.Data[inetDiagInodeAt:])), 10))
				}
			}
		}
	}
}
