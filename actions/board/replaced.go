package board

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/internal/logkey"
)

// A board is bound to the file it opened, not to its path. SQLite names
// its -wal and -shm files after the path, so a database file moved away or
// deleted while bee processes run leaves them writing to a file nobody else
// sees, through siblings that a new file at the path would share: the
// board would split, and the new file would read the old one's WAL. So:
//
//   - Each Board checks, cheaply (one stat), at every read and write and
//     whenever the file's inode reports a rename, unlink or attribute
//     change (see fileWatch), that its path still names the file it
//     opened. When it does
//     not, the Board stops for good: every call returns ErrReplaced, and it
//     closes its database at once, which lets go of the siblings.
//   - Open admits a file the lock file's record does not name (see
//     lockRecord) only once no process holds the old siblings any more; it
//     waits for that up to the busy timeout, then fails with an ErrLocked
//     that names the processes. A WAL the new file cannot own is set aside
//     as PATH-wal.orphaned-<time>, never applied.

// checkFile stops the Board when its path no longer names the file it
// opened, or names it emptied, and returns the error every call will
// return from then on. Errors other than a missing path (a permission
// change, say) prove nothing and are ignored.
func (b *Board) checkFile() error {
	if b.file == (fileID{}) {
		return nil // not admitted yet
	}
	var st unix.Stat_t
	err := unix.Stat(b.path, &st)
	id := fileID{uint64(st.Dev), st.Ino}
	var what string
	switch {
	case err == nil && id == b.file && st.Size == 0:
		// A board's file is never empty once made (see admitLocked): it
		// was truncated (": > board.db", say). SQLite would go on writing
		// commits into a WAL whose file is gone, and claims would wait on
		// locks that never come free.
		return b.stop(emptiedErr(b.path))
	case err == nil && id == b.file:
		return nil
	case err == nil:
		what = "was replaced by another file"
	case errors.Is(err, fs.ErrNotExist):
		what = "was moved away or deleted"
	default:
		return nil
	}
	return b.stop(fmt.Errorf("board %s %s while this process had it open; it stopped using the old file so that a new board can start there: open the board again (restart the bridge, or run /mcp in Claude Code): %w",
		b.path, what, ErrReplaced))
}

// emptiedErr says that the board file at path was emptied under a running
// Board, and what to do.
func emptiedErr(path string) error {
	return fmt.Errorf("board %s was emptied (truncated to 0 bytes) while this process had it open, so its actions are gone from it; "+
		"this process stopped using it: restore the file from a copy (see bee backup), or move it aside (mv %s %s.bad) and bee will start a new board there; "+
		"then open the board again (restart the bridge, or run /mcp in Claude Code): %w",
		path, path, path, ErrCorrupt)
}

// stop makes err the answer of every later call (unless the Board already
// refuses calls for damage) and closes the Board in the background,
// releasing the database file's siblings for a new file at the path. It
// returns the error later calls get.
func (b *Board) stop(err error) error {
	// The answer first: calls that the close ends must give it, not
	// ErrClosed. A Board already refusing calls for damage keeps that
	// answer.
	if !b.broken.CompareAndSwap(nil, &err) {
		err = *b.broken.Load()
	}
	if b.stopping.CompareAndSwap(false, true) {
		b.log.Error("board stops", logkey.Err, err)
		// Close waits for the Board's goroutines, and stop may run on one
		// of them (the watcher): close from a goroutine of its own, which
		// ends when Close does (Close's waits are bounded).
		go func() {
			<-b.opened // Open may still be setting the Board up
			b.Close()
		}()
	}
	return err
}

// admit checks the database file before SQLite opens it (see checkHeader)
// and binds the Board to it. A file the lock file's record names, that is
// not empty, needs nothing more; otherwise (a new, empty, moved, replaced
// or never recorded file) admit holds the write lock while it decides,
// and returns release: the caller opens the database (its first
// connection writes a new file's header) and calls release, so that no
// other process sees the file half-made.
func (b *Board) admit() (release func(), err error) {
	st, err := checkHeader(b.path, false)
	if err != nil {
		return nil, err
	}
	rec := b.lock.record()
	if st.exists && st.size > 0 && rec.db == st.id {
		if rec.damaged == st.id {
			return nil, damagedErr(b.path, rec)
		}
		b.bind(st.id)
		return nil, nil
	}

	deadline := time.Now().Add(b.opts.BusyTimeout)
	created := false  // by an earlier turn of the loop
	var holders []int // who held the old file's siblings at the last look
	for {
		ctx, cancel := context.WithDeadline(b.ctx, deadline)
		release, err := b.lock.acquire(ctx)
		cancel()
		switch {
		case err != nil && holders != nil && errors.Is(err, context.DeadlineExceeded):
			return nil, inUseErr(b.path, holders, b.opts.BusyTimeout)
		case err != nil:
			return nil, b.waitErr(context.Background(), "open", err)
		}
		holders, err = b.admitLocked(&created)
		if err != nil || holders == nil {
			if err != nil {
				release()
				return nil, err
			}
			return release, nil
		}
		release()
		if !time.Now().Before(deadline) {
			return nil, inUseErr(b.path, holders, b.opts.BusyTimeout)
		}
		// They let go as soon as they notice, within milliseconds unless
		// they are stopped.
		time.Sleep(min(20*time.Millisecond, time.Until(deadline)))
	}
}

// admitLocked is admit's decision, under the write lock. It returns the
// processes that still hold the siblings of a file that is not this one,
// if any (then nothing is bound: the caller waits and tries again).
// created tells whether the file is one admit made; admitLocked sets it.
func (b *Board) admitLocked(created *bool) (holders []int, err error) {
	st, err := checkHeader(b.path, true)
	if err != nil {
		return nil, err
	}
	if !st.existed {
		*created = true
		b.created = true
	}
	existed := st.existed && !*created
	rec := b.lock.record()
	walSize := int64(-1)
	if fi, err := os.Stat(b.path + "-wal"); err == nil {
		walSize = fi.Size()
	}
	switch {
	case existed && st.size == 0 && (rec.db == st.id || (rec.db == fileID{} && walSize > 0)):
		// Made under this lock, a board's file is never empty; this one
		// was a board before.
		return nil, corruptErr(b.path, "it is empty, but it was a board (its lock file or WAL says so)", nil)
	case rec.damaged == st.id:
		return nil, damagedErr(b.path, rec)
	}
	// The siblings belong to another file when the record says so, or when
	// a WAL sits next to an empty file (SQLite writes a file's header
	// before its first WAL frame).
	if (rec.db != fileID{} && rec.db != st.id) || (st.size == 0 && walSize > 0) {
		pids, ok := users(b.path + "-shm")
		if !ok {
			b.log.Warn("cannot read /proc/locks; assuming nobody holds the old file's siblings")
		}
		if len(pids) > 0 {
			return pids, nil
		}
		if err := b.setAside(walSize); err != nil {
			return nil, err
		}
	}
	b.bind(st.id)
	return nil, nil
}

// bind makes id the file this Board serves.
func (b *Board) bind(id fileID) {
	b.file = id
	b.lock.bind(id)
}

// setAside moves the WAL and shared-memory files of another database file
// out of the way; nobody holds them.
func (b *Board) setAside(walSize int64) error {
	wal := b.path + "-wal"
	switch {
	case walSize > 0:
		dst := fmt.Sprintf("%s.orphaned-%d", wal, time.Now().UnixMilli())
		if err := os.Rename(wal, dst); err != nil {
			return fmt.Errorf("open board %s: set aside the WAL another file left: %w", b.path, err)
		}
		b.log.Warn("a WAL left by another database file at this path was set aside, not applied", logkey.Path, dst)
	case walSize == 0:
		_ = os.Remove(wal)
	}
	if err := os.Remove(b.path + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open board %s: remove the shared-memory file another file left: %w", b.path, err)
	}
	return nil
}

// inUseErr says which processes still hold the siblings of a board file
// that was moved away, deleted or replaced. It wraps ErrLocked: trying
// again once they let go succeeds.
func inUseErr(path string, pids []int, waited time.Duration) error {
	slices.Sort(pids)
	var who []string
	for _, pid := range pids {
		if pid > 0 {
			who = append(who, lockHolder{pid: pid}.String())
		}
	}
	if len(who) == 0 {
		who = append(who, "another process")
	}
	return temporary(fmt.Errorf("board %s was moved away, deleted or replaced while %s still had the old file open, and they have not let go of its -wal and -shm files within %v (a bee process lets go within milliseconds unless it is stopped); resume or end them, then try again: %w",
		path, strings.Join(who, ", "), waited, ErrLocked))
}
