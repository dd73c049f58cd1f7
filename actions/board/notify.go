package board

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/logkey"
	"golang.org/x/sys/unix"
)

// The files in the notify directory. A writer touches the base name for a
// change that concerns everyone, and "<base>-<agent>" for one that
// concerns the waiters of one agent only (see package wakeup). Agent
// names hold only letters, digits, '.', '_' and '-' and start with a letter
// or digit (identity.CheckName), so every such name is a plain file name,
// and the base never holds '-'.
const (
	wakeFile   = "wake"   // an action may have become claimable
	endedFile  = "ended"  // an action ended (done, failed, cancelled)
	changeFile = "change" // an action changed in another way (claimed)
)

// A notifier carries wake-ups between processes. A writer touches a file in
// the notify directory after its commit; each Board watches the directory
// with one watcher (dirWatch) and fans each event out to the local waiters it
// concerns by closing their channels. Watching the directory (rather than
// the files) survives the files being deleted or replaced; the directory is
// dedicated so that the database's own writes (to its -wal file) wake
// nobody. If the directory itself is removed, the notifier makes it again
// and wakes everyone, since a touch may have been missed meanwhile.
//
// A post addressed to one agent touches that agent's wake file, so of the
// bridges waiting on the machine only that agent's look at the database;
// the others' watchers read the event and go back to sleep. Changes that
// can make work claimable for many (a reclaim, a departure) touch the
// file for everyone.
//
// Claims and finishes matter only to Changes (bee watch), and touching a file
// at every claim would wake the watcher of every process. So a Board that
// runs Changes holds a shared flock on the watching file (path-watching, next
// to the database) for its lifetime, and a writer touches the change file
// only when its probe for an exclusive lock on it fails. (A watching file
// deleted and made again splits the two; Changes then falls back to its safety
// poll.) The watching file lives outside the notify directory because an
// open file inside it would keep a removed directory from reporting its
// removal.
type notifier struct {
	dir          string
	watchingPath string
	log          *slog.Logger
	w            *dirWatch
	probe        *os.File // the watching file, for writers' probes

	watchOnce sync.Once
	watching  *os.File // held share-locked once this Board runs Changes

	hub *engine.Hub // the local waiters
}

// newNotifier watches the notify directory dir, making it (and the
// watching file) when missing unless readOnly is set.
func newNotifier(dir, watchingPath string, log *slog.Logger, hub *engine.Hub, life *engine.Life, readOnly bool) (*notifier, error) {
	create := os.O_CREATE
	if readOnly {
		create = 0
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("notify directory: %w", err)
	}
	w, err := newDirWatch(dir)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	probe, err := os.OpenFile(watchingPath, os.O_RDONLY|create, 0o600)
	if err != nil {
		_ = w.close()
		return nil, fmt.Errorf("notify directory: %w", err)
	}
	n := &notifier{
		dir:          dir,
		watchingPath: watchingPath,
		log:          log,
		w:            w,
		probe:        probe,
		hub:          hub,
	}
	if !life.Go(n.run) {
		_ = w.close()
		_ = probe.Close()
		return nil, errLockClosed
	}
	return n, nil
}

// A dirEvent is one event of the notify directory's watch.
type dirEvent struct {
	name string // the base name of the file it concerns
	gone bool   // the directory itself was removed or renamed
	err  error  // the watch failed or lost events (an overflow)
}

// errOverflow says a watch lost events: something may have been missed.
var errOverflow = errors.New("too many events; some were lost")

// run turns the watcher's events into wake-ups of the hub until the watcher closes.
func (n *notifier) run() {
	n.w.run(func(ev dirEvent) {
		switch {
		case ev.err != nil:
			// An overflow or the like: something may have been missed.
			n.log.Warn("board watcher error", logkey.Err, ev.err)
			n.hub.FireAll()
			return
		case ev.gone:
			n.rewatch()
			n.hub.FireAll()
			return
		}
		base, key, _ := strings.Cut(ev.name, "-")
		switch base {
		case wakeFile:
			n.hub.Fire(engine.Event{Kind: engine.Claimable, Key: key})
		case endedFile:
			n.hub.Fire(engine.Event{Kind: engine.Ended, Key: key})
		case changeFile:
			n.hub.Fire(engine.Event{Kind: engine.Changed})
		}
	})
}

// rewatch makes the notify directory again after it was removed and
// watches the new one.
func (n *notifier) rewatch() {
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		n.log.Error("cannot make the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	if err := n.w.add(); err != nil {
		n.log.Error("cannot watch the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	n.log.Warn("notify directory was removed; made it again", logkey.Path, n.dir)
}

// watch registers this Board as running Changes, so that writers in every
// process touch the change file for it. It fails only when the watching
// file cannot be opened; Changes then relies on its safety poll.
func (n *notifier) watch() {
	n.watchOnce.Do(func() {
		f, err := os.OpenFile(n.watchingPath, os.O_RDONLY|os.O_CREATE, 0o600)
		if err == nil {
			err = flockShared(int(f.Fd()))
			if err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			n.log.Warn("cannot register as a watcher; changes other than posts show at the safety poll", logkey.Err, err)
			return
		}
		n.watching = f
	})
}

// watched reports whether a Board in some process runs Changes (or the probe
// failed, when it is safer to say yes).
func (n *notifier) watched() bool {
	fd := int(n.probe.Fd())
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false
}

// flockShared takes a shared lock, trying for at most a second: a writer
// holds the exclusive lock only for its probe, but a writer stopped
// mid-probe must not hang Changes.
func flockShared(fd int) error {
	var err error
	for range 50 {
		err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// tell tells every process watching the board about a commit's event e
// (see package wakeup): it touches e's file. The file is opened afresh
// each time so that a replaced file is written, not the old one. A failed
// touch is logged: waiters elsewhere fall back to the safety poll. A
// change that is neither claimable nor an end is told only when a process
// runs Changes.
func (n *notifier) tell(e engine.Event) {
	var name string
	switch e.Kind {
	case engine.Claimable:
		name = wakeFile
	case engine.Ended:
		name = endedFile
	default:
		if !n.watched() {
			return
		}
		name = changeFile
	}
	if e.Key != wakeup.Everyone && e.Kind != engine.Changed {
		name += "-" + e.Key
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

func (n *notifier) close() error {
	errs := []error{n.w.close(), n.probe.Close()}
	if n.watching != nil {
		errs = append(errs, n.watching.Close())
	}
	return errors.Join(errs...)
}
