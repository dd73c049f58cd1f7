package board

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrBackupExists: Backup's destination exists already; Backup never
// overwrites a file.
var ErrBackupExists = errors.New("backup file exists already")

// Backup writes a copy of the board, consistent as of one moment, to the
// new file dst, while other processes go on reading and writing it.
// Copying board.db by hand while bridges run is not safe: recent changes
// live in board.db-wal until a checkpoint, so a copy of the file alone
// misses them, or holds half of a change.
//
// It runs SQLite's VACUUM INTO in one read transaction: in WAL mode a
// reader sees one snapshot and holds up no writer, so the copy is the
// board as of the moment the transaction began, WAL included, in a
// single file with no -wal of its own (and compacted). SQLite's online
// backup API would do too, but it restarts its copy whenever another
// connection writes between its steps, so against busy bridges it may
// never finish, or must hold its read lock for the whole copy anyway,
// which is what VACUUM INTO does in one statement.
//
// The copy is written to a temporary file next to dst, synced, and only
// then put at dst, so dst never holds half a copy. Backup refuses a dst
// that exists (ErrBackupExists) and one whose folder does not exist; the
// copy opens with Open like any board file (move it to the board's path to
// restore it, with no bee running on that board).
func (b *Board) Backup(ctx context.Context, dst string) (err error) {
	if err := b.closed(); err != nil {
		return err
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("back up board %s to %s: %w", b.path, dst, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("back up board %s: %s: %w", b.path, abs, ErrBackupExists)
	}
	dir := filepath.Dir(abs)
	// VACUUM INTO needs a file that does not exist or is empty: an empty
	// temporary file, in dst's folder so the last step is a link.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(abs)+".*.tmp")
	if err != nil {
		return fmt.Errorf("back up board %s: %w", b.path, err)
	}
	tmpPath := tmp.Name()
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("back up board %s: %w", b.path, err)
	}
	defer func() {
		if rerr := os.Remove(tmpPath); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("back up board %s: remove %s: %w", b.path, tmpPath, rerr)
		}
	}()
	err = b.read(ctx, "backup", func(ctx context.Context) error {
		_, err := b.db.ExecContext(ctx, "VACUUM INTO ?", tmpPath)
		return err
	})
	if err != nil {
		return fmt.Errorf("back up board %s: %w", b.path, err)
	}
	if err := syncFile(tmpPath); err != nil {
		return fmt.Errorf("back up board %s: %w", b.path, err)
	}
	// A link fails when dst exists, so a file that appeared meanwhile is
	// never replaced.
	if err := os.Link(tmpPath, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("back up board %s: %s: %w", b.path, abs, ErrBackupExists)
		}
		return fmt.Errorf("back up board %s: %w", b.path, err)
	}
	return syncFile(dir)
}

// syncFile flushes the file or folder at path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
