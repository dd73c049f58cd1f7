package sockowner

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procRoot is where proc is mounted.
const procRoot = "/proc"

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// Check returns nil when every socket listening on TCP port port (IPv4 or
// IPv6, any address) is one of process pid's open descriptors. It returns
// an error wrapping ErrNotListening when none listens, ErrNotOwner when one
// belongs to another process or pid's descriptors cannot be read, and
// another error when /proc cannot be read.
func Check(pid, port int) error {
	if pid < 1 || port < 1 || port > 65535 {
		return fmt.Errorf("sockowner: bad pid %d or port %d", pid, port)
	}
	inodes, err := listenersDiag(port)
	if errors.Is(err, errDiagUnavailable) {
		inodes, err = listenersProc(port)
	}
	if err != nil {
		return fmt.Errorf("sockowner: %w", err)
	}
	if len(inodes) == 0 {
		return fmt.Errorf("port %d: %w", port, ErrNotListening)
	}
	owned, err := sockets(pid)
	if err != nil {
		return fmt.Errorf("port %d: cannot read the sockets of pid %d (%v): %w", port, pid, err, ErrNotOwner)
	}
	for _, ino := range inodes {
		if !owned[ino] {
			return fmt.Errorf("port %d: a listener on it is not pid %d's: %w", port, pid, ErrNotOwner)
		}
	}
	return nil
}

// listenersProc returns the inodes of the TCP sockets (IPv4 and IPv6)
// listening on port, from /proc/net/tcp and /proc/net/tcp6.
func listenersProc(port int) ([]string, error) {
	var inodes []string
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		found, err := listeners(filepath.Join(procRoot, table), port)
		if errors.Is(err, fs.ErrNotExist) && table == "net/tcp6" {
			continue // no IPv6 on this machine
		}
		if err != nil {
			return nil, err
		}
		inodes = append(inodes, found...)
	}
	return inodes, nil
}

// listeners returns the inodes of the sockets in the /proc/net/tcp-style
// table at path that listen on port.
func listeners(path string, port int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	var inodes []string
	// Large reads: the kernel walks the table again for every read.
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 64<<10))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen || !strings.HasSuffix(fields[1], want) {
			continue
		}
		inodes = append(inodes, fields[9])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return inodes, nil
}

// sockets returns the inodes of pid's open sockets.
func sockets(pid int) (map[string]bool, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool)
	for _, de := range des {
		target, err := os.Readlink(filepath.Join(dir, de.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			out[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return out, nil
}
