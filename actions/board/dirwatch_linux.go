package board

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirMask is the events a dirWatch asks for: fsnotify's (create, write,
// remove, rename, chmod), of the directory's files and of the directory
// itself.
const dirMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// A dirWatch is the notify directory's watch: an inotify watch of its own
// rather than fsnotify's, whose reading goroutine keeps a 64 KiB array on
// its stack, so that every idle process with a Board open held a 128 KiB
// stack for it.
type dirWatch struct {
	dir string
	f   *os.File // the inotify instance, non-blocking: Close ends a Read
}

// newDirWatch watches dir.
func newDirWatch(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	w := &dirWatch{dir: dir, f: os.NewFile(uintptr(fd), "inotify "+dir)}
	if err := w.add(); err != nil {
		_ = w.f.Close()
		return nil, err
	}
	return w, nil
}

// add watches the directory (again, once it has been made again). It
// reaches the descriptor through SyscallConn, as os.File.Fd advises: Fd
// may put a non-blocking descriptor in blocking mode, where a Read holds
// a thread, and Control keeps the descriptor from being closed meanwhile.
func (w *dirWatch) add() error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		_, werr = unix.InotifyAddWatch(int(fd), w.dir, dirMask)
	}); err != nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("watch %s: %w", w.dir, werr)
	}
	return nil
}

// run calls on with each event until the watch is closed.
func (w *dirWatch) run(on func(dirEvent)) {
	buf := make([]byte, 4096) // room for many events; a read never splits one
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : min(off+unix.SizeofInotifyEvent+int(ev.Len), n)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				on(dirEvent{err: fmt.Errorf("watch %s: %w", w.dir, errOverflow)})
			case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
				on(dirEvent{gone: true})
			case ev.Mask&unix.IN_IGNORED != 0:
				// The watch of a removed directory ended; gone came first.
			default:
				on(dirEvent{name: cString(name)})
			}
		}
	}
}

// cString returns b up to its first NUL: inotify pads names with NULs.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func (w *dirWatch) close() error { return w.f.Close() }
