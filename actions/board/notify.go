package board

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/tractat-us/bee/logkey"
)

// The files in the notify directory whose changes wake waiters.
const (
	wakeFile   = "wake"   // an action may have become claimable
	changeFile = "change" // an action changed in another way (claimed, done)
)

// A notifier carries wake-ups between processes. A writer touches a file in
// the notify directory after its commit; each Board watches the directory
// with one fsnotify watcher and fans each event out to its local waiters by
// closing a broadcast channel. Watching the directory (rather than the
// files) survives the files being deleted or replaced; the directory is
// dedicated so that the database's own writes (to its -wal file) wake
// nobody. If the directory itself is removed, the notifier makes it again
// and wakes everyone, since a touch may have been missed meanwhile.
type notifier struct {
	dir string
	log *slog.Logger
	w   *fsnotify.Watcher

	mu     sync.Mutex    // guards wake and change
	wake   chan struct{} // closed when an action may have become claimable
	change chan struct{} // closed on any change, claimable or not
}

func newNotifier(dir string, log *slog.Logger, g *group) (*notifier, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("notify directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	n := &notifier{
		dir:    dir,
		log:    log,
		w:      w,
		wake:   make(chan struct{}),
		change: make(chan struct{}),
	}
	if !g.Go(n.run) {
		_ = w.Close()
		return nil, errLockClosed
	}
	return n, nil
}

// run turns the watcher's events into broadcasts until the watcher closes.
func (n *notifier) run() {
	for {
		select {
		case ev, ok := <-n.w.Events:
			if !ok {
				return
			}
			switch {
			case ev.Name == n.dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
				n.rewatch()
				n.broadcast(true)
			case filepath.Base(ev.Name) == wakeFile:
				n.broadcast(true)
			case filepath.Base(ev.Name) == changeFile:
				n.broadcast(false)
			}
		case err, ok := <-n.w.Errors:
			if !ok {
				return
			}
			// An overflow or the like: something may have been missed.
			n.log.Warn("board watcher error", logkey.Err, err)
			n.broadcast(true)
		}
	}
}

// rewatch makes the notify directory again after it was removed and
// watches the new one.
func (n *notifier) rewatch() {
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		n.log.Error("cannot make the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	if err := n.w.Add(n.dir); err != nil {
		n.log.Error("cannot watch the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	n.log.Warn("notify directory was removed; made it again", logkey.Path, n.dir)
}

// wakeCh returns the channel closed at the next claimable change. Take it
// before looking at the database, so a change made after the look is never
// missed.
func (n *notifier) wakeCh() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wake
}

// changeCh returns the channel closed at the next change of any kind.
func (n *notifier) changeCh() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.change
}

// broadcast wakes the local waiters: all of them when claimable, else only
// those waiting for any change.
func (n *notifier) broadcast(claimable bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.change)
	n.change = make(chan struct{})
	if claimable {
		close(n.wake)
		n.wake = make(chan struct{})
	}
}

// touch tells every process watching the board about a commit, and the
// local waiters at once. The file is opened afresh each time so that a
// replaced file is written, not the old one. A failed touch is logged:
// waiters elsewhere fall back to the safety poll.
func (n *notifier) touch(claimable bool) {
	n.broadcast(claimable)
	name := changeFile
	if claimable {
		name = wakeFile
	}
	path := filepath.Join(n.dir, name)
	err := touchFile(path)
	if errors.Is(err, os.ErrNotExist) {
		// The directory was removed; make it again (watchers do the same).
		if err = os.MkdirAll(n.dir, 0o700); err == nil {
			err = touchFile(path)
		}
	}
	if err != nil {
		n.log.Warn("cannot touch the notify file; other processes fall back to the safety poll", logkey.Path, path, logkey.Err, err)
	}
}

func touchFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte{'.'}, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (n *notifier) close() error { return n.w.Close() }
