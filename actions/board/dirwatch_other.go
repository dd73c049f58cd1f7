//go:build !linux

package board

import (
	"github.com/fsnotify/fsnotify"
)

// A dirWatch watches directories for the notifier: fsnotify, off Linux
// (Linux has an inotify watch of its own, see dirwatch_linux.go).
type dirWatch struct{ w *fsnotify.Watcher }

// newDirWatch returns a watch of no directory yet.
func newDirWatch() (*dirWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &dirWatch{w: w}, nil
}

// add watches the directory path (again, after it was removed or moved
// and made again).
func (w *dirWatch) add(path string) error { return w.w.Add(path) }

// run calls on with each event until the watch is closed.
func (w *dirWatch) run(on func(dirEvent)) {
	ops := []struct {
		from fsnotify.Op
		to   dirOp
	}{{fsnotify.Create, opCreate}, {fsnotify.Write, opWrite}, {fsnotify.Remove, opRemove}, {fsnotify.Rename, opRename}, {fsnotify.Chmod, opChmod}}
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			de := dirEvent{name: ev.Name}
			for _, o := range ops {
				if ev.Has(o.from) {
					de.op |= o.to
				}
			}
			on(de)
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			on(dirEvent{err: err})
		}
	}
}

// close ends the watch, and run with it. It may be called more than once.
func (w *dirWatch) close() error { return w.w.Close() }
