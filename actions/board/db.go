package board

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/internal/logkey"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// recordCols are the columns scanRecord reads, in order, of a row of
// actions (the hot table, unaliased: the subqueries name it); see
// recordColsOf.
var recordCols = recordColsOf("actions")

// everyCols are recordCols of a row of every_action (see endedMigration).
var everyCols = recordColsOf("every_action")

// recordColsOf are the columns scanRecord reads, in order, of a row of
// table (named so, unaliased: the subqueries name it): the last two are
// the action's prerequisites as given and, while it is blocked, those not
// yet done, each a comma-separated list of seqs or NULL (see
// prereqColsOf).
func recordColsOf(table string) string {
	return `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, done_at, repo, paths, ` +
		prereqColsOf(table)
}

// prereqColsOf read what an action of table waits for: index lookups on
// prerequisites' primary key and ended_actions' (a prerequisite is done
// when it has ended done), on the page's own statement.
func prereqColsOf(table string) string {
	return `priority,
	(SELECT group_concat(p.pre, ',' ORDER BY p.ord) FROM prerequisites p WHERE p.seq = ` + table + `.seq),
	CASE WHEN state = 'blocked' THEN (SELECT group_concat(p.pre, ',' ORDER BY p.ord)
		FROM prerequisites p WHERE p.seq = ` + table + `.seq AND NOT ` + preDone + `) END`
}

// preDone says that the prerequisite p.pre has ended done.
const preDone = `EXISTS (SELECT 1 FROM ended_actions d WHERE d.seq = p.pre AND d.state = 'done')`

type scanner interface{ Scan(dest ...any) error }

// selectAction reads one action, by its seq, wherever it is.
var selectAction = `SELECT ` + everyCols + ` FROM every_action WHERE seq = ?`

// noRows maps the database's "no rows" for one action to the contract's
// actions.ErrUnknownAction, unwrapped (see engine.Store): the one place the
// board file does.
func noRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return actions.ErrUnknownAction
	}
	return err
}

func scanRecord(s scanner, extra ...any) (_ actions.Record, err error) {
	var (
		r                  actions.Record
		state              string
		posted             int64
		claimedAt, endedAt sql.NullInt64
		paths              string
		after, blockedBy   sql.NullString
	)
	dest := append([]any{&r.Seq, &r.To, &r.From, &r.Title, &r.Body, &state, &r.Holder, &r.Result, &r.Reason, &r.EndedBy,
		&posted, &claimedAt, &endedAt, &r.Repo, &paths, &r.Priority, &after, &blockedBy}, extra...)
	if err := s.Scan(dest...); err != nil {
		return actions.Record{}, err
	}
	if r.Paths, err = decodePaths(paths); err != nil {
		return actions.Record{}, err
	}
	r.ID = position.ActionID(r.Seq)
	r.After, r.BlockedBy = seqIDs(after.String), seqIDs(blockedBy.String)
	r.State = actions.State(state)
	r.PostedAt = fromMS(posted)
	if claimedAt.Valid {
		t := fromMS(claimedAt.Int64)
		r.ClaimedAt = &t
	}
	if endedAt.Valid {
		t := fromMS(endedAt.Int64)
		r.EndedAt = &t
	}
	return r, nil
}

// seqIDs turns a comma-separated list of seqs into action ids; nil for
// none.
func seqIDs(list string) []string {
	if list == "" {
		return nil
	}
	seqs := strings.Split(list, ",")
	for i, s := range seqs {
		seqs[i] = "a-" + s
	}
	return seqs
}

// write runs fn in one write transaction (BEGIN IMMEDIATE) on the write
// connection, while holding the write lock. It waits for the locks at most
// BusyTimeout (then ErrLocked) and no longer than ctx allows (then ctx's
// error); once the transaction has begun it runs to its end whatever ctx
// does, so a committed write is never reported as failed. Errors fn
// returns that do not come from the database pass through unchanged.
func (b *Board) write(ctx context.Context, op string, fn func(t wtx) error) (err error) {
	if err := b.closed(); err != nil {
		return err
	}
	if b.readOnly != nil {
		return b.readOnlyErr(op)
	}
	wctx, cancel := b.life.Bound(ctx, b.opts.BusyTimeout)
	defer cancel()
	release, err := b.lock.acquire(wctx)
	if err != nil {
		return b.waitErr(ctx, op, err)
	}
	// Unthrottled, under the lock: a write to a file emptied meanwhile
	// would commit into a WAL whose file is gone (see checkFile).
	if err := b.checkFile(); err != nil {
		release()
		return err
	}
	err = b.transact(wctx, fn)
	release()
	if err != nil {
		if isDBErr(err) {
			return b.waitErr(ctx, op, err)
		}
		return err
	}
	if b.writes.Add(1)%checkpointEvery == 0 {
		b.checkpoint()
	}
	return nil
}

// transact runs fn between BEGIN IMMEDIATE and COMMIT, or ROLLBACK when
// either fails.
func (b *Board) transact(ctx context.Context, fn func(t wtx) error) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	t := wtx{b: b, ctx: quiet(ctx)}
	err := t.checkVersion()
	if err == nil {
		err = fn(t)
	}
	if err == nil {
		_, err = b.wconn.ExecContext(t.ctx, "COMMIT")
	}
	if err != nil {
		if _, rerr := b.wconn.ExecContext(t.ctx, "ROLLBACK"); rerr != nil {
			b.log.Error("rollback failed", logkey.Err, rerr)
		}
	}
	return err
}

// checkpointEvery is how many of its writes a Board lets pass between WAL
// checkpoints.
const checkpointEvery = 128

// checkpoint copies the WAL back into the database file. SQLite would do
// this inside a commit, while bee's write lock is held and every writer
// waits (a checkpoint syncs the disk twice); the write connection turns
// that off, and each Board checkpoints every checkpointEvery writes
// instead, outside the lock. A PASSIVE checkpoint does not wait for
// readers or writers; a failed one is retried at the next turn.
func (b *Board) checkpoint() {
	if _, err := b.db.ExecContext(quiet(b.ctx), "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		b.log.Debug("checkpoint failed; retrying later", logkey.Err, err)
	}
}

// begin starts the write transaction. The lock file keeps bee's writers
// apart, so BEGIN nearly always succeeds at once on the write connection,
// whose busy timeout is 0. Only a writer that ignores the lock file (the
// sqlite3 shell, say) makes it fail with SQLITE_BUSY; then begin waits, up
// to the busy timeout and no longer than ctx allows.
func (b *Board) begin(ctx context.Context) error {
	q := quiet(ctx)
	_, err := b.wconn.ExecContext(q, "BEGIN IMMEDIATE")
	if !isLockContention(err) {
		return err
	}
	if _, err := b.wconn.ExecContext(q, "PRAGMA busy_timeout = "+strconv.FormatInt(b.opts.BusyTimeout.Milliseconds(), 10)); err != nil {
		return err
	}
	// A context that can end costs a goroutine per statement in the
	// driver; this is the one statement where it is worth it.
	_, err = b.wconn.ExecContext(ctx, "BEGIN IMMEDIATE")
	if err != nil {
		// When ctx ends just as BEGIN succeeds, the driver reports ctx's
		// error with the transaction open (and SQLite's write lock held):
		// make sure it is not.
		_, _ = b.wconn.ExecContext(q, "ROLLBACK")
	}
	if _, perr := b.wconn.ExecContext(q, "PRAGMA busy_timeout = 0"); perr != nil {
		b.log.Error("cannot reset the write connection's busy timeout", logkey.Err, perr)
	}
	return err
}

// patiently runs read, a read on the write connection, and when SQLite
// gives up on a lock at once (that connection's busy timeout is 0, see
// begin) runs it again waiting up to the busy timeout, as the read pool
// would. Another process's Open may hold a lock for a moment (while it
// makes the file a WAL database, or recovers its WAL index:
// SQLITE_BUSY_RECOVERY), which no reader should take for a stuck board.
func (b *Board) patiently(ctx context.Context, read func() error) error {
	err := read()
	if !isLockContention(err) {
		return err
	}
	q := quiet(ctx)
	if _, perr := b.wconn.ExecContext(q, "PRAGMA busy_timeout = "+strconv.FormatInt(b.opts.BusyTimeout.Milliseconds(), 10)); perr != nil {
		return err
	}
	err = read()
	if _, perr := b.wconn.ExecContext(q, "PRAGMA busy_timeout = 0"); perr != nil {
		b.log.Error("cannot reset the write connection's busy timeout", logkey.Err, perr)
	}
	return err
}

// isLockContention reports whether err is SQLite giving up on a lock
// another process holds: SQLITE_BUSY, or SQLITE_PROTOCOL, which a WAL
// reader returns after about 10 s of retries while another process holds
// one of the WAL's shared-memory locks (a process stopped mid-checkpoint,
// say). Both wrote nothing, and waiting and trying again mends them.
func isLockContention(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	return false
}

// isDBErr reports whether err came from the database or the waits around
// it, rather than from the board's own checks.
func isDBErr(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrTxDone) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, errLockClosed) || isBadScan(err)
}

// waitErr says why an operation on the database failed: the caller's ctx
// ended (its error, unwrapped, so callers can compare it), the Board
// closed, the busy timeout passed, or the database failed.
func (b *Board) waitErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.ctx.Err() != nil || errors.Is(err, errLockClosed) {
		return b.closed()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return b.lockedErr(op, nil)
	}
	return b.dbErr(op, err)
}

// read runs fn, a read, and says why it failed. Reads do not wait for
// writers (WAL), so they need no bound of their own. A read of a Board
// that reads the file alone fails with ErrReadOnly once another process
// has begun writing (see checkStillAlone): its answer may be torn.
func (b *Board) read(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	if err := b.closed(); err != nil {
		return err
	}
	err := fn(ctx)
	if aerr := b.checkStillAlone(op); aerr != nil {
		return aerr
	}
	if err == nil || errors.Is(err, sql.ErrNoRows) || !isDBErr(err) {
		return err
	}
	return b.waitErr(ctx, op, err)
}

// nextRev is the change number for the rows a write transaction changes:
// above every change before it, since writes are serialized. Changes reports
// changes in (rev, seq) order, so each change is reported once. An ended
// action keeps its rev in ended_actions, so both tables count.
const nextRev = `(SELECT max(coalesce((SELECT max(rev) FROM actions), 0), coalesce((SELECT max(rev) FROM ended_actions), 0)) + 1)`
