//go:build !linux

package board

import (
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// A dirWatch is the notify directory's watch (fsnotify; Linux has an
// inotify watch of its own, see dirwatch_linux.go).
type dirWatch struct {
	dir string
	w   *fsnotify.Watcher
}

// newDirWatch watches dir.
func newDirWatch(dir string) (*dirWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &dirWatch{dir: dir, w: w}, nil
}

// add watches the directory again, once it has been made again.
func (w *dirWatch) add() error { return w.w.Add(w.dir) }

// run calls on with each event until the watch is closed.
func (w *dirWatch) run(on func(dirEvent)) {
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if ev.Name == w.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				on(dirEvent{gone: true})
				continue
			}
			on(dirEvent{name: filepath.Base(ev.Name)})
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			on(dirEvent{err: err})
		}
	}
}

func (w *dirWatch) close() error { return w.w.Close() }
