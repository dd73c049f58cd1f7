package board

import (
	"fmt"
	"os"

	"github.com/tractat-us/bee/actions/internal/engine"
	"golang.org/x/sys/unix"
)

// A fileWatch calls its function whenever the database file's inode is
// renamed, unlinked (its link count changes) or has its attributes
// changed: an inotify watch of its own with just those events, because
// fsnotify would also report every write, and a checkpoint's writes would
// wake every process's watcher once per page.
type fileWatch struct{ f *os.File }

// watchFile watches path; the watch's goroutine, in g, ends at close.
func watchFile(path string, changed func(), life *engine.Life) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_ATTRIB|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	// Non-blocking, so the runtime's poller waits for it and Close ends a
	// Read in progress.
	w := &fileWatch{f: os.NewFile(uintptr(fd), "inotify "+path)}
	if !life.Go(func() { w.run(changed) }) {
		_ = w.f.Close()
		return nil, errLockClosed
	}
	return w, nil
}

func (w *fileWatch) run(changed func()) {
	buf := make([]byte, 4096)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return // closed
		}
		changed()
	}
}

func (w *fileWatch) close() error { return w.f.Close() }
