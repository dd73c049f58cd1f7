package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/actions/boards"
)

// BackupCommand is `bee backup`: a consistent copy of the board file,
// made while agents use it.
type BackupCommand struct {
	env *env
}

func (c *BackupCommand) flagSet() *flag.FlagSet {
	return c.env.flags("backup")
}

// backuper is a board that can copy itself to a file (the embedded
// board; see board.Board.Backup).
type backuper interface {
	Backup(ctx context.Context, dst string) error
}

// Run copies the board to the file args names.
func (c *BackupCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() != 1 {
		return usagef("bee backup ~/bee-board-$(date +%F).db", "bee backup: want one file to write the copy to, got %d arguments", fs.NArg())
	}
	dst := fs.Arg(0)
	location, _, err := c.env.location("backup")
	if err != nil {
		return err
	}
	if boards.IsRemote(location) {
		return usagef("pg_dump --table='bee_*' '"+shown(location)+"' > bee-board.sql",
			"bee backup: the board is on PostgreSQL (%s); back it up with PostgreSQL's own tools", shown(location))
	}
	if err := checkBackupPath(dst); err != nil {
		return err
	}
	b, err := c.env.open("backup", false)
	if err != nil {
		return err
	}
	defer b.Close()
	bk, ok := b.(backuper)
	if !ok {
		return fmt.Errorf("bee backup: the board at %s cannot be copied by bee", shown(b.Location()))
	}
	if err := bk.Backup(ctx, dst); err != nil {
		if errors.Is(err, board.ErrBackupExists) {
			return backupExists(dst)
		}
		return c.env.refusal(ctx, b, "backup", "", err)
	}
	_, err = fmt.Fprintf(c.env.main.Stdout, "backed up %s to %s\n", b.Location(), dst)
	return err
}

// checkBackupPath refuses, before the board is opened, a destination that
// exists or whose folder does not.
func checkBackupPath(dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return backupExists(dst)
	}
	dir := filepath.Dir(dst)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &cliError{code: exitUsage, err: err,
			msg:  fmt.Sprintf("bee backup: the folder %s does not exist", dir),
			hint: "create it first: mkdir -p " + shellQuote(dir)}
	}
	return nil
}

// backupExists refuses dst, which exists.
func backupExists(dst string) error {
	return refusedf(board.ErrBackupExists, "remove it, or name a new file", "bee backup: %s exists already, and a backup never overwrites a file", dst)
}

// Usage prints how to use `bee backup`.
func (c *BackupCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Copy the board to a new file, consistent as of one moment, while agents and
bee commands go on using it. (A copy of board.db made with cp while bridges
run misses what is still in board.db-wal, or holds half a change.) It never
overwrites a file. To restore, stop every bee on the board and move the copy
to the board's path.

A board on PostgreSQL is backed up with PostgreSQL's own tools:
pg_dump --table='bee_*' URL > bee-board.sql.

Usage:

	bee backup FILE

Flags:

`)
	printFlags(w, c.flagSet())
}

var _ backuper = (*board.Board)(nil)
