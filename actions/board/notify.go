package board

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/logkey"
	"golang.org/x/sys/unix"
)

// The files in the notify directory. A writer touches the base name at
// the top of the directory for a change that concerns everyone, and, for
// one that concerns the waiters of one key (an agent, or people: see
// package wakeup), the base name in that key's folder "for-<key>" and
// "<base>-<key>" in the folder "every". Agent names hold only letters,
// digits, '.', '_' and '-' and start with a letter or digit
// (identity.CheckName), so every such name is a plain file name, and the
// base never holds '-'.
//
// Bees before the folders touched "<base>-<key>" at the top instead: a
// Board still hears those (see notifier).
const (
	wakeFile   = "wake"   // an action may have become claimable
	endedFile  = "ended"  // an action ended (done, failed, cancelled)
	changeFile = "change" // an action changed in another way (claimed)

	keyDirPrefix = "for-"  // "for-<key>": the changes that concern key
	everyDir     = "every" // every change that concerns one key
)

// keyDir is the folder, in the notify directory, of the changes that
// concern key.
func keyDir(key string) string { return keyDirPrefix + key }

// A notifier carries wake-ups between processes. A writer touches a file in
// the notify directory after its commit; each Board watches the directory
// with one dirWatch, and fans each event out to the local waiters it
// concerns by closing their channels. The directory is dedicated so that the
// database's own writes (to its -wal file) wake nobody.
//
// A post addressed to one agent, and the end of an action one agent posted,
// touch a file in that agent's folder ("for-<agent>"), which only the Boards
// with a waiter of that agent watch: of the bridges waiting on the machine,
// only that agent's wakes at all, the others' processes sleep on. (Every
// Board watching the whole directory, as bees did before, woke all 32
// processes of a board of 32 bridges at each post and again at its end.)
// A Board adds the watch of a key's folder the first time a waiter of that
// key asks (Hub's hear), before it looks at the database, so no touch after
// the look is missed; it keeps it for its lifetime. The same touch goes to
// "every/<base>-<agent>", which only Boards that need every change watch:
// those that run Changes (bee watch, the board page) or wait for every end
// (Await). Changes that can make work claimable for many (a reclaim, a
// departure) touch the file at the top, for everyone.
//
// Watching directories (rather than files) survives the files being deleted
// or replaced. If a folder is removed or renamed, the notifier wakes the
// waiters of its key, and watches it again once it appears: a writer makes
// it at its next touch there. If the directory itself is removed, the
// notifier makes and watches it again and wakes everyone, since a touch
// may have been missed meanwhile; its folders come back as writers touch
// them. A Board that cannot make a folder (a read-only board) watches it
// once another process makes it, and wakes its waiters then.
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
//
// Bees of both kinds on one board: a Board still hears the files an older
// bee touches at the top of the directory ("wake-<agent>",
// "ended-<agent>", and the files of everyone), so it wakes for everything
// an older bee writes. An older bee watches only the top: it hears the
// changes for everyone and, while it runs Changes, the claims, but a post
// addressed to an agent or the end of an action an agent or a person
// posted, written by this bee, reaches it only at its safety poll
// ([Options.SafetyPoll], 60 s by default), as PostgreSQL boards' bees
// before per-agent channels hear this bee's. Upgrade every bee on the
// machine together.
type notifier struct {
	dir          string
	watchingPath string
	log          *slog.Logger
	w            *dirWatch
	probe        *os.File // the watching file, for writers' probes
	readOnly     bool     // makes no folder

	watchOnce sync.Once
	watching  *os.File // held share-locked once this Board runs Changes

	mu      sync.Mutex      // guards folders
	folders map[string]bool // the folders a waiter asked for: watched now?

	hub   *engine.Hub  // the local waiters
	heard atomic.Int64 // events the watcher received, for tests
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
	w, err := newDirWatch()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if err := w.add(dir); err != nil {
		_ = w.close()
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
		readOnly:     readOnly,
		folders:      make(map[string]bool),
		hub:          hub,
	}
	if !life.Go(n.run) {
		_ = w.close()
		_ = probe.Close()
		return nil, errLockClosed
	}
	return n, nil
}

// hear makes the notifier watch the folder that carries e from other
// processes (see engine.NewHub): key's folder for a key, "every" for every
// change or every end.
func (n *notifier) hear(e engine.Event) {
	switch {
	case e.Kind == engine.Changed:
		n.watch()
		n.want(everyDir)
	case e.Key == wakeup.Everyone:
		n.want(everyDir)
	default:
		n.want(keyDir(e.Key))
	}
}

// want watches the folder name from now on, making it when missing. It
// returns once the watch is in place, so that a waiter that asks before
// it looks at the database misses no touch. A folder that cannot be made
// (a read-only board's that no writer has made yet) is watched once it
// appears, and its waiters woken then (see folderEvent).
func (n *notifier) want(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.folders[name]; ok {
		return
	}
	n.folders[name] = n.addFolder(name, true)
}

// addFolder watches the folder name, n.mu held, making it first when
// make is set (and the Board is not read-only), and reports whether it
// watches it. A failure to watch a folder that should be there is logged:
// until the folder appears again, its waiters fall back to the safety
// poll.
func (n *notifier) addFolder(name string, make bool) bool {
	path := filepath.Join(n.dir, name)
	if make && !n.readOnly {
		// A folder that cannot be made shows as one that cannot be watched.
		if err := os.Mkdir(path, 0o700); errors.Is(err, os.ErrNotExist) {
			_ = os.MkdirAll(path, 0o700) // the directory was removed
		}
	}
	if err := n.w.add(path); err != nil {
		if make && (!n.readOnly || !errors.Is(err, os.ErrNotExist)) {
			n.log.Warn("cannot watch a notify folder; its waiters fall back to the safety poll until it is made", logkey.Path, path, logkey.Err, err)
		}
		return false
	}
	return true
}

// run turns the watcher's events into wake-ups of the hub until the watcher closes.
func (n *notifier) run() {
	n.w.run(func(ev dirEvent) {
		if ev.err != nil {
			// An overflow or the like: something may have been missed.
			n.log.Warn("board watcher error", logkey.Err, ev.err)
			n.hub.FireAll()
			return
		}
		n.heard.Add(1)
		n.event(ev)
	})
}

// event wakes the waiters ev concerns.
func (n *notifier) event(ev dirEvent) {
	if ev.name == n.dir {
		if ev.has(opRemove | opRename) {
			n.rewatch()
			n.hub.FireAll()
		}
		return
	}
	rel, ok := strings.CutPrefix(ev.name, n.dir+string(filepath.Separator))
	if !ok {
		return
	}
	folder, file, inFolder := strings.Cut(rel, string(filepath.Separator))
	switch {
	case inFolder && folder == everyDir:
		n.fire(strings.Cut(file, "-"))
	case inFolder:
		if key, ok := strings.CutPrefix(folder, keyDirPrefix); ok {
			n.fire(file, key, true)
		}
	case folder == everyDir || strings.HasPrefix(folder, keyDirPrefix):
		n.folderEvent(folder, ev)
	default:
		// A file at the top: everyone's, or an older bee's for one key.
		n.fire(strings.Cut(folder, "-"))
	}
}

// fire wakes the waiters of the change the file base tells of, for key
// (Everyone when keyed is false).
func (n *notifier) fire(base, key string, keyed bool) {
	if !keyed {
		key = wakeup.Everyone
	}
	switch base {
	case wakeFile:
		n.hub.Fire(engine.Event{Kind: engine.Claimable, Key: key})
	case endedFile:
		n.hub.Fire(engine.Event{Kind: engine.Ended, Key: key})
	case changeFile:
		n.hub.Fire(engine.Event{Kind: engine.Changed})
	}
}

// folderEvent handles a folder made, removed or renamed. A folder a
// waiter asked for that is removed or renamed away is not made again here
// (that would fight whoever removes the directory): the next writer to
// touch a file in it makes it, and the folder's appearing (a Create at the
// top) has it watched again. Either way its waiters are woken, since a
// touch may have been missed meanwhile. (A removal or rename may come
// twice, from the directory's watch and the folder's own.)
func (n *notifier) folderEvent(folder string, ev dirEvent) {
	if !ev.has(opCreate | opRemove | opRename) {
		return
	}
	n.mu.Lock()
	watched, wanted := n.folders[folder]
	if !wanted || (watched && ev.has(opCreate)) {
		n.mu.Unlock()
		return
	}
	n.folders[folder] = ev.has(opCreate) && n.addFolder(folder, false)
	n.mu.Unlock()
	if key, ok := strings.CutPrefix(folder, keyDirPrefix); ok {
		n.hub.Fire(engine.Event{Kind: engine.Claimable, Key: key})
		n.hub.Fire(engine.Event{Kind: engine.Ended, Key: key})
		return
	}
	// "every": those waiting for every change or end, whom an event for
	// people wakes (no agent's waiter waits for people's events).
	n.hub.Fire(engine.Event{Kind: engine.Claimable, Key: wakeup.People})
	n.hub.Fire(engine.Event{Kind: engine.Ended, Key: wakeup.People})
}

// rewatch makes the notify directory again after it was removed and
// watches the new one.
func (n *notifier) rewatch() {
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		n.log.Error("cannot make the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	if err := n.w.add(n.dir); err != nil {
		n.log.Error("cannot watch the notify directory again; waiters fall back to the safety poll", logkey.Path, n.dir, logkey.Err, err)
		return
	}
	n.mu.Lock()
	for name := range n.folders {
		n.folders[name] = false // watched again once a writer makes it
	}
	n.mu.Unlock()
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
// (see package wakeup): it touches e's files (see notifier). A file is
// opened afresh each time so that a replaced file is written, not the old
// one. A failed touch is logged: waiters elsewhere fall back to the safety
// poll. A change that is neither claimable nor an end is told only when a
// process runs Changes.
func (n *notifier) tell(e engine.Event) {
	var base string
	switch e.Kind {
	case engine.Claimable:
		base = wakeFile
	case engine.Ended:
		base = endedFile
	default:
		if n.watched() {
			n.touch(changeFile)
		}
		return
	}
	if e.Key == wakeup.Everyone {
		n.touch(base)
		return
	}
	// People's folder: no waiter waits there (agent names hold no '~'),
	// and those who hear of people's events (Await, Changes) watch
	// "every"; touching it would cost every end of a person's action a
	// write to a file nobody reads.
	if e.Key != wakeup.People {
		n.touch(filepath.Join(keyDir(e.Key), base))
	}
	n.touch(filepath.Join(everyDir, base+"-"+e.Key))
}

// touch touches the file name in the notify directory, making its folder
// (and the directory) when missing.
func (n *notifier) touch(name string) {
	path := filepath.Join(n.dir, name)
	err := touchFile(path)
	if errors.Is(err, os.ErrNotExist) {
		// The folder or the directory was removed, or the folder was
		// never made; make it (watchers do the same).
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
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
