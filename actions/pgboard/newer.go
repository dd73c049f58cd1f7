package pgboard

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/internal/logkey"
)

// A Board reads the database's schema version at Open, but a newer bee
// may migrate it while this one runs (a bridge runs for days). Writing on
// through a schema this bee does not know could break what the newer bee
// keeps, so every write transaction checks the version in its first round
// trip, which it sends anyway (for its transaction id), before it writes:
//
//  1. SELECT pg_advisory_xact_lock_shared(migrateLock): a migration holds
//     that lock exclusively from before its transaction begins until after
//     it commits (see migrateLocked), so no migration commits while the
//     write runs, and a write that begins while one runs waits for it;
//  2. then, with a snapshot taken after that lock, the transaction's id and
//     the schema version.
//
// A version newer than this bee's stops the Board for good: that write
// and every later call return ErrNewerSchema. A read that fails on a
// schema it does not know says so too (see schemaGone).

// firstTrip is what a write transaction sends first, after its BEGIN and
// in one pipeline with its first statement (see pipeTx): the version
// check (unless Options.noVersionCheck) and the read of its id. Its
// reader returns the id, or ErrNewerSchema's error when a newer bee has
// migrated the database.
func (b *Board) firstTrip() firstTrip {
	first := &pgx.Batch{}
	if b.opts.noVersionCheck {
		first.Queue(`SELECT ` + xidExpr)
		return firstTrip{first, func(br pgx.BatchResults) (xid int64, err error) {
			err = br.QueryRow().Scan(&xid)
			return xid, err
		}}
	}
	first.Queue(`SELECT pg_advisory_xact_lock_shared($1)`, migrateLock)
	first.Queue(`SELECT ` + xidExpr + `, (SELECT coalesce(max(version), 0) FROM bee_schema_version)`)
	return firstTrip{first, func(br pgx.BatchResults) (xid int64, err error) {
		if _, err := br.Exec(); err != nil {
			return 0, err
		}
		var v int
		if err := br.QueryRow().Scan(&xid, &v); err != nil {
			return 0, err
		}
		if v > schemaVersion {
			return 0, b.refuseNewer(v)
		}
		return xid, nil
	}}
}

// xidExpr reads the transaction's id (assigning one), for write's
// resolution of a commit whose answer was lost.
const xidExpr = `pg_current_xact_id()::text::bigint`

// newerSchemaErr is the error of a Board that found its database
// migrated to schema v by a newer bee after it opened it.
func (b *Board) newerSchemaErr(v int) error {
	return &reachError{sentinel: ErrNewerSchema,
		msg: fmt.Sprintf("board %s was migrated to schema %d by a newer bee while this process had it open, and this bee understands only up to %d; it refuses the board from now on: upgrade bee on this machine, then restart this process (in Claude Code, /mcp restarts the bridge)",
			b.location, v, schemaVersion)}
}

// refuseNewer stops the Board for good: the database has schema v, newer
// than this bee's. It returns the error every call returns from now on.
func (b *Board) refuseNewer(v int) error {
	err := b.newerSchemaErr(v)
	if b.broken.CompareAndSwap(nil, &err) {
		b.log.Error("board migrated by a newer bee; refusing it from now on", logkey.SchemaFrom, schemaVersion, logkey.SchemaTo, v)
	}
	return *b.broken.Load()
}

// schemaGone turns err, an error of a statement that no longer fits the
// schema (a column or table it names is gone), into ErrNewerSchema when a
// newer bee has migrated the database; otherwise it returns err.
func (b *Board) schemaGone(ctx context.Context, err error) error {
	if !isCode(err, "42703") && !isCode(err, "42P01") && !isCode(err, "42883") { // undefined column, table, function
		return err
	}
	var v int
	if b.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM bee_schema_version`).Scan(&v) == nil && v > schemaVersion {
		return b.refuseNewer(v)
	}
	return err
}
