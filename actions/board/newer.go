package board

import (
	"fmt"

	"github.com/tractat-us/bee/internal/logkey"
)

// A Board reads the file's schema version at Open, but a newer bee may
// migrate the file while this one has it open (a bridge runs for days).
// Writing on through a schema this bee does not know could break what the
// newer bee keeps (a table it added, a rule its columns encode), so every
// write transaction reads the version again, under the write lock, before
// it writes (PRAGMA user_version: a read of the file's header, which SQLite
// has just checked to begin the transaction). A newer version stops the
// Board for good: that write and every later call return ErrNewerSchema.
// A read that fails on a schema it does not know says so too (see dbErr).

// newerSchemaErr is the error of a Board that found its file migrated to
// schema v by a newer bee after it opened it.
func newerSchemaErr(path string, v int) error {
	return saidErr{fmt.Sprintf("board %s was migrated to schema %d by a newer bee while this process had it open, and this bee understands only up to %d; it refuses the file from now on: upgrade bee, then restart this process (in Claude Code, /mcp restarts the bridge)",
		path, v, schemaVersion), ErrNewerSchema}
}

// checkVersion refuses, inside a write transaction, a file a newer bee has
// migrated; the Board then refuses every later call.
func (t wtx) checkVersion() error {
	if t.b.opts.noVersionCheck {
		return nil
	}
	var v int
	if err := t.row("PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v <= schemaVersion {
		return nil
	}
	return t.b.refuseNewer(v)
}

// refuseNewer stops the Board for good: the file has schema v, newer
// than this bee's. It returns the error every call returns from now on.
func (b *Board) refuseNewer(v int) error {
	err := newerSchemaErr(b.path, v)
	if b.broken.CompareAndSwap(nil, &err) {
		b.log.Error("board file migrated by a newer bee; refusing it from now on", logkey.SchemaFrom, schemaVersion, logkey.SchemaTo, v)
	}
	return *b.broken.Load()
}

// fileVersion reads the file's schema version outside a transaction; ok
// is false when it cannot be read.
func (b *Board) fileVersion() (v int, ok bool) {
	if b.db == nil {
		return 0, false
	}
	err := b.db.QueryRowContext(quiet(b.ctx), "PRAGMA user_version").Scan(&v)
	return v, err == nil
}

// A saidErr is an error whose text says everything, its sentinel's
// meaning included: it wraps the sentinel without saying its words
// again.
type saidErr struct {
	msg      string
	sentinel error
}

func (e saidErr) Error() string { return e.msg }
func (e saidErr) Unwrap() error { return e.sentinel }
