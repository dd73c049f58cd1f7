package board

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// # Read-only boards
//
// A board whose folder, file or lock file the caller cannot write (another
// user's board, a folder made read-only, a read-only mount) still opens,
// read-only: every read works, and every write is refused with
// ErrReadOnly, naming what cannot be written and what to do. Nothing on
// disk changes: no lock file, WAL, shared-memory or notify file is made.
//
// SQLite reads a WAL database without write access only through WAL and
// shared-memory files that already exist (a process that can write has the
// board open): the Board then opens the database with mode=ro and sees
// every commit. When there is no WAL, nothing can be writing, since any
// writer would first make one: the Board then reads the file alone
// (immutable=1), and a read that finds a WAL has appeared since the Board
// opened is refused with ErrReadOnly too, saying to run the command again,
// rather than answered from a file that may be changing underneath.

// ErrReadOnly: the caller cannot write the board's folder, file or lock
// file, so the Board only reads. Every write returns it, wrapped with what
// cannot be written and what to do; so does a read of a Board that read
// the file alone (no WAL) once another process has begun writing.
var ErrReadOnly = errors.New("board is read-only for this user")

// A readOnlyReason says which of the board's files or its folder the
// caller cannot write, and why.
type readOnlyReason struct {
	what, path string
	err        error
}

func (r *readOnlyReason) Error() string {
	if r.err == unix.EROFS {
		return fmt.Sprintf("%s is on a read-only filesystem", r.what)
	}
	return fmt.Sprintf("%s is not writable by this user (%v)", r.what, r.err)
}

// readOnly says why the caller cannot write the board at path (absolute),
// or returns nil when it can: its folder, or its file or lock file where
// they exist, are not writable (mode bits, a read-only mount). Root can
// write anything but a read-only mount.
func readOnly(path string) *readOnlyReason {
	dir := filepath.Dir(path)
	for _, f := range []readOnlyReason{
		{what: "its folder " + dir, path: dir},
		{what: "the board file", path: path},
		{what: "its lock file " + path + "-lock", path: path + "-lock"},
	} {
		err := unix.Access(f.path, unix.W_OK)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
			f.err = err
			return &f
		}
	}
	return nil
}

// readOnlyErr is the refusal of op on a read-only board.
func (b *Board) readOnlyErr(op string) error {
	mend := fmt.Sprintf("get write access to %s (chmod u+w %s, or ask its owner)", b.readOnly.path, b.readOnly.path)
	if b.readOnly.err == unix.EROFS {
		mend = "copy it to a writable filesystem"
	}
	return fmt.Errorf("board %s: cannot %s: %v, so bee can read this board but not change it; %s, or use a board you can write (--board or $%s): %w",
		b.path, op, b.readOnly, mend, EnvPath, ErrReadOnly)
}

// admitReadOnly is admit for a read-only Board: it checks the file, which
// must exist and be a board, and decides whether to read it alone
// (immutable), without taking the write lock: nothing is made or moved.
func (b *Board) admitReadOnly() error {
	st, err := checkHeader(b.path, false)
	if err != nil {
		return err
	}
	if !st.exists {
		return fmt.Errorf("no board at %s, and bee cannot make one: %v: %w", b.path, b.readOnly, ErrReadOnly)
	}
	rec := b.lock.record()
	switch {
	case st.size == 0:
		return corruptErr(b.path, "it is empty", nil)
	case rec.damaged == st.id:
		return damagedErr(b.path, rec)
	}
	// The WAL and shared-memory files are this file's unless the lock
	// file's record names another file (see admitLocked); another file's
	// are never applied.
	foreign := rec.db != fileID{} && rec.db != st.id
	b.immutable = foreign || !exists(b.path+"-wal")
	b.bind(st.id)
	return nil
}

// checkStillAlone refuses a read of a Board that reads the file alone
// (immutable), once a WAL has appeared next to it: another process is
// writing, and the file may change under the read.
func (b *Board) checkStillAlone(op string) error {
	if !b.immutable || !exists(b.path+"-wal") {
		return nil
	}
	return fmt.Errorf("board %s: cannot %s: another process began writing the board after bee opened it read-only (%v); run the command again: %w",
		b.path, op, b.readOnly, ErrReadOnly)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// openLockReadOnly opens the lock file at path for reading its record, or
// returns a lock without a file when there is none.
func openLockReadOnly(path string) (*writeLock, error) {
	l := &writeLock{path: path, token: make(chan struct{}, 1)}
	l.token <- struct{}{}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, nil
	case err != nil:
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	l.f, l.fd = f, int(f.Fd())
	return l, nil
}
