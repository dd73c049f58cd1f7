package board

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirMask is the events a dirWatch asks for: fsnotify's (create, write,
// remove, rename, chmod), of a directory's files and of the directory
// itself.
const dirMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// A dirWatch watches directories (the notify directory and its folders)
// for the notifier, with the events and names fsnotify would report,
// through one inotify instance of its own. fsnotify's reading goroutine
// keeps a 64 KiB array on its stack (a 128 KiB stack, half of it
// resident, in every idle process with a Board open) and holds a thread
// in epoll_wait; a dirWatch reads into a 4 KiB buffer through the
// runtime's poller, on the goroutine that calls run.
//
// As with fsnotify: a directory removed or moved away is reported as
// removed or renamed (a removed folder of a watched directory once, by
// its parent), and its watch ends; add watches a path again, as a new
// directory, once it has been made again. Events of a directory no longer
// watched are dropped. add and close may be called from any goroutine,
// while run reads.
type dirWatch struct {
	f *os.File // the inotify instance, non-blocking: close ends a read

	// mu guards the watches; add holds it across inotify_add_watch, so run
	// never reads an event of a watch it does not know yet.
	mu    sync.Mutex
	paths map[int]string // watch descriptor -> the directory's path
	wds   map[string]int // the directory's path -> its watch descriptor
}

// newDirWatch returns a watch of no directory yet.
func newDirWatch() (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	return &dirWatch{
		f:     os.NewFile(uintptr(fd), "inotify"),
		paths: make(map[int]string),
		wds:   make(map[string]int),
	}, nil
}

// control runs f on the inotify descriptor. It goes through SyscallConn,
// as os.File.Fd advises: Fd may put a non-blocking descriptor in blocking
// mode, where a read holds a thread, and Control keeps the descriptor
// from being closed meanwhile.
func (w *dirWatch) control(f func(fd int) error) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// add watches the directory path (again, after it was removed or moved
// and made again). An error for a path that does not exist satisfies
// errors.Is(err, os.ErrNotExist).
func (w *dirWatch) add(path string) error {
	path = filepath.Clean(path)
	w.mu.Lock()
	defer w.mu.Unlock()
	var wd int
	err := w.control(func(fd int) error {
		var err error
		wd, err = unix.InotifyAddWatch(fd, path, dirMask)
		return err
	})
	if err != nil {
		return &os.PathError{Op: "watch", Path: path, Err: err}
	}
	if old, ok := w.wds[path]; ok && old != wd {
		// The path's earlier directory, moved away: its events are no
		// longer this path's.
		w.forget(old, path)
		_ = w.control(func(fd int) error { _, err := unix.InotifyRmWatch(fd, uint32(old)); return err })
	}
	if old, ok := w.paths[wd]; ok && old != path {
		delete(w.wds, old) // the same directory under a new path
	}
	w.paths[wd], w.wds[path] = path, wd
	return nil
}

// forget drops the watch wd of path, w.mu held.
func (w *dirWatch) forget(wd int, path string) {
	delete(w.paths, wd)
	if w.wds[path] == wd {
		delete(w.wds, path)
	}
}

// run calls on with each event until the watch is closed. An error
// reading the watch is reported once, as an event, and ends run.
func (w *dirWatch) run(on func(dirEvent)) {
	buf := make([]byte, 4096) // room for many events; a read never splits one
	var evs []dirEvent
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				on(dirEvent{err: fmt.Errorf("read inotify: %w", err)})
			}
			return
		}
		evs = w.decode(buf[:n], evs[:0])
		for _, ev := range evs {
			on(ev)
		}
	}
}

// decode appends the events in buf, as read from inotify, to evs.
func (w *dirWatch) decode(buf []byte, evs []dirEvent) []dirEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := buf[off+unix.SizeofInotifyEvent : min(off+unix.SizeofInotifyEvent+int(raw.Len), len(buf))]
		off += unix.SizeofInotifyEvent + int(raw.Len)
		if ev, ok := w.event(raw, name); ok {
			evs = append(evs, ev)
		}
	}
	return evs
}

// event turns one inotify event into a dirEvent, w.mu held, and keeps the
// watches up to date with it; ok is false for an event nobody is told of.
func (w *dirWatch) event(raw *unix.InotifyEvent, name []byte) (ev dirEvent, ok bool) {
	mask := raw.Mask
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return dirEvent{err: errOverflow}, true
	}
	wd := int(raw.Wd)
	path, known := w.paths[wd]
	if !known {
		return dirEvent{}, false // a watch already ended
	}
	switch {
	case mask&(unix.IN_IGNORED|unix.IN_UNMOUNT) != 0:
		w.forget(wd, path) // the watch ended
		return dirEvent{}, false
	case mask&unix.IN_DELETE_SELF != 0:
		w.forget(wd, path)
		if _, ok := w.wds[filepath.Dir(path)]; ok {
			return dirEvent{}, false // its parent's watch reports it
		}
		return dirEvent{name: path, op: opRemove}, true
	case mask&unix.IN_MOVE_SELF != 0:
		// The directory lives on elsewhere; what happens there is not this
		// path's.
		w.forget(wd, path)
		_ = w.control(func(fd int) error { _, err := unix.InotifyRmWatch(fd, uint32(wd)); return err })
		return dirEvent{name: path, op: opRename}, true
	}
	if len(name) > 0 {
		path = filepath.Join(path, cString(name))
	}
	ev = dirEvent{name: path}
	for _, m := range []struct {
		mask uint32
		op   dirOp
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, opCreate},
		{unix.IN_MODIFY, opWrite},
		{unix.IN_DELETE, opRemove},
		{unix.IN_MOVED_FROM, opRename},
		{unix.IN_ATTRIB, opChmod},
	} {
		if mask&m.mask != 0 {
			ev.op |= m.op
		}
	}
	return ev, ev.op != 0
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

// close ends the watch, and run with it. It may be called more than once.
func (w *dirWatch) close() error {
	if err := w.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
