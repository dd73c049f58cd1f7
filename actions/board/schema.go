package board

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
	"golang.org/x/sys/unix"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The schema, one migration per version. PRAGMA user_version holds the
// version of a file; Open applies the migrations it lacks, in one write
// transaction, and refuses a file whose version is higher than len(migrations).
//
// actions: one row per action. seq is the posting order and the action's
// identity (id is derived from it: "a-<seq>"); rev orders changes, so Changes
// can report each change once. A done action keeps its holder: the identity
// that finished it.
//
// members: one row per identity that joined. lease_until is renewed while
// the identity holds a claim (daily otherwise); a claim whose holder has no
// live row (departed, or lease expired) goes back to open before the next
// claim.
//
// meta: board_id (random, carried in cursors so that a cursor from another
// board file is refused).
//
// Version 2 adds the terminal states failed and cancelled (SQLite cannot
// change a CHECK, so the actions table is copied into a new one), the
// reason and ended_by of an ended action, told_at (when the poster heard of
// the outcome; actions ended before it count as told, so nobody is woken
// for old news) and members.waiter_at (when the session's wake-on-work
// waiter was armed). done_at holds when any ended action ended.
//
// Version 3 adds plans: the state blocked (an action that waits for
// prerequisites not yet done; never claimed, and it has no holder), the
// priority of an action (0 most urgent .. 4, default 2; claims take the
// most urgent first, oldest first within one: actions_open is walked in
// that order), and the prerequisites table, one row per edge: seq waits
// for pre (always an older action), ord its place in the after list as
// given; prerequisites_pre finds an action's waiters, actions_blocked the
// blocked actions addressed to an identity that departs. The CHECKs are
// loosened in place (SQLite's documented way for a change that every row
// already meets; see reloadSchema), not by copying the table, so that
// columns other migrations add to actions are kept whatever the order in
// which they run. The prerequisites hold no foreign keys: a later
// migration that copies actions would trip them.
var migrations = []string{
	1: `
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value NOT NULL -- no type: kept exactly as written
) WITHOUT ROWID;

CREATE TABLE actions (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT GENERATED ALWAYS AS ('a-' || seq) VIRTUAL,
	to_whom    TEXT NOT NULL DEFAULT '',
	from_whom  TEXT NOT NULL,
	title      TEXT NOT NULL,
	body       TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'claimed', 'done')),
	holder     TEXT NOT NULL DEFAULT '',
	result     TEXT NOT NULL DEFAULT '',
	posted_at  INTEGER NOT NULL,
	claimed_at INTEGER,
	done_at    INTEGER,
	rev        INTEGER NOT NULL,
	CHECK ((state = 'open') = (holder = ''))
);
CREATE INDEX actions_open ON actions (to_whom, seq) WHERE state = 'open';
CREATE INDEX actions_claimed ON actions (holder) WHERE state = 'claimed';
CREATE INDEX actions_rev ON actions (rev, seq);

CREATE TABLE members (
	identity    TEXT PRIMARY KEY,
	agent       TEXT NOT NULL,
	pid         INTEGER NOT NULL,
	claude_pid  INTEGER NOT NULL DEFAULT 0,
	session_id  TEXT NOT NULL DEFAULT '',
	joined_at   INTEGER NOT NULL,
	renewed_at  INTEGER NOT NULL,
	lease_until INTEGER NOT NULL,
	departed_at INTEGER
) WITHOUT ROWID;
`,
	2: `
CREATE TABLE actions2 (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT GENERATED ALWAYS AS ('a-' || seq) VIRTUAL,
	to_whom    TEXT NOT NULL DEFAULT '',
	from_whom  TEXT NOT NULL,
	title      TEXT NOT NULL,
	body       TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'claimed', 'done', 'failed', 'cancelled')),
	holder     TEXT NOT NULL DEFAULT '',
	result     TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	ended_by   TEXT NOT NULL DEFAULT '',
	posted_at  INTEGER NOT NULL,
	claimed_at INTEGER,
	done_at    INTEGER,
	told_at    INTEGER,
	rev        INTEGER NOT NULL,
	CHECK (state <> 'open' OR holder = ''),
	CHECK (state NOT IN ('claimed', 'done', 'failed') OR holder <> '')
);
INSERT INTO actions2 (seq, to_whom, from_whom, title, body, state, holder, result, ended_by, posted_at, claimed_at, done_at, told_at, rev)
	SELECT seq, to_whom, from_whom, title, body, state, holder, result,
		CASE WHEN state = 'done' THEN holder ELSE '' END, posted_at, claimed_at, done_at, done_at, rev
	FROM actions;
-- Keep the posting order's high-water mark: ids are never reused.
CREATE TEMP TABLE seq_keep AS SELECT coalesce(max(seq), 0) AS seq FROM sqlite_sequence WHERE name IN ('actions', 'actions2');
DROP TABLE actions;
ALTER TABLE actions2 RENAME TO actions;
DELETE FROM sqlite_sequence WHERE name IN ('actions', 'actions2');
INSERT INTO sqlite_sequence (name, seq) SELECT 'actions', seq FROM seq_keep;
DROP TABLE temp.seq_keep;
CREATE INDEX actions_open ON actions (to_whom, seq) WHERE state = 'open';
CREATE INDEX actions_claimed ON actions (holder) WHERE state = 'claimed';
CREATE INDEX actions_rev ON actions (rev, seq);
CREATE INDEX actions_untold ON actions (from_whom) WHERE told_at IS NULL AND state IN ('done', 'failed', 'cancelled');
ALTER TABLE members ADD COLUMN waiter_at INTEGER;
`,
	3: `
ALTER TABLE actions ADD COLUMN priority INTEGER NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4);
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(replace(sql,
		'CHECK (state IN (''open'', ''claimed'', ''done'', ''failed'', ''cancelled''))',
		'CHECK (state IN (''open'', ''blocked'', ''claimed'', ''done'', ''failed'', ''cancelled''))'),
		'CHECK (state <> ''open'' OR holder = '''')',
		'CHECK (state NOT IN (''open'', ''blocked'') OR holder = '''')')
	WHERE type = 'table' AND name = 'actions';
-- RESET, not OFF: the connection rereads the schema, or a later ALTER TABLE
-- of the same run (migration 4's) edits the old text at the new offsets.
PRAGMA writable_schema = RESET;
DROP INDEX actions_open;
CREATE INDEX actions_open ON actions (to_whom, priority, seq) WHERE state = 'open';
CREATE INDEX actions_blocked ON actions (to_whom) WHERE state = 'blocked';
CREATE TABLE prerequisites (
	seq INTEGER NOT NULL,
	pre INTEGER NOT NULL,
	ord INTEGER NOT NULL,
	PRIMARY KEY (seq, pre)
) WITHOUT ROWID;
CREATE INDEX prerequisites_pre ON prerequisites (pre, seq);
`,
	4: reservationsMigration,
	5: `ALTER TABLE members ADD COLUMN client TEXT NOT NULL DEFAULT '';`,
	6: endedMigration,
}

// endedMigration is schema 6: ended actions leave the hot table. An action
// that ends (done, failed, cancelled) moves from actions to ended_actions
// in the transaction that ends it, keeping its seq and rev, so that what
// claims, renewals and the live views walk holds only the open, blocked and
// claimed actions, however long the board's history. every_action is both,
// for the views that read every action (Get, List, Changes, plans). The
// actions that ended before it are moved; AUTOINCREMENT's high-water mark
// (sqlite_sequence) stays on actions, so no seq is ever used twice.
// actions_untold moves with the outcomes it finds.
var endedMigration = `
CREATE TABLE ended_actions (
	seq        INTEGER PRIMARY KEY,
	id         TEXT GENERATED ALWAYS AS ('a-' || seq) VIRTUAL,
	to_whom    TEXT NOT NULL DEFAULT '',
	from_whom  TEXT NOT NULL,
	title      TEXT NOT NULL,
	body       TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL CHECK (state IN ('done', 'failed', 'cancelled')),
	holder     TEXT NOT NULL DEFAULT '',
	result     TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL DEFAULT '',
	ended_by   TEXT NOT NULL DEFAULT '',
	posted_at  INTEGER NOT NULL,
	claimed_at INTEGER,
	done_at    INTEGER,
	told_at    INTEGER,
	rev        INTEGER NOT NULL,
	priority   INTEGER NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
	repo       TEXT NOT NULL DEFAULT '',
	paths      TEXT NOT NULL DEFAULT '',
	held_by    TEXT NOT NULL DEFAULT '',
	CHECK (state = 'cancelled' OR holder <> '')
);
INSERT INTO ended_actions (` + actionCols + `)
	SELECT ` + actionCols + ` FROM actions WHERE state IN ('done', 'failed', 'cancelled') ORDER BY seq;
DELETE FROM actions WHERE state IN ('done', 'failed', 'cancelled');
DROP INDEX actions_untold;
CREATE INDEX ended_actions_rev ON ended_actions (rev, seq);
CREATE INDEX ended_actions_untold ON ended_actions (from_whom) WHERE told_at IS NULL;
CREATE VIEW every_action AS
	SELECT ` + actionCols + ` FROM actions
	UNION ALL
	SELECT ` + actionCols + ` FROM ended_actions;
`

// actionCols are the stored columns of an action, in both of its tables.
const actionCols = `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, done_at, told_at, rev, priority, repo, paths, held_by`

// schemaVersion is the version this bee writes.
var schemaVersion = len(migrations) - 1

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// A fileState is what checkHeader found at the board's path.
type fileState struct {
	exists  bool // a file is there (now, after create)
	existed bool // it was there before checkHeader looked
	size    int64
	id      fileID
}

// checkHeader refuses an existing, non-empty file that is not a SQLite
// database, or whose size is not a whole number of its pages (truncated, or
// with something appended), before SQLite sees it, and a directory. SQLite
// would read the missing part of a cut page as zeros, and report rows of
// NULLs rather than damage. A missing or empty file is a new board (see
// admit for when it is not). With create, a missing file is created, with
// O_EXCL: of two processes creating a board at once, exactly one finds
// that it did (existed false).
func checkHeader(path string, create bool) (fileState, error) {
	var st fileState
	flags := os.O_RDONLY
	if create {
		// A new board is created here, private to its owner, before SQLite
		// creates it with the umask's mode (its -wal and -shm files copy it).
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	switch {
	case err == nil:
	case create && errors.Is(err, fs.ErrExist):
		st.existed = true
		f, err = os.Open(path)
	case !create && errors.Is(err, fs.ErrNotExist):
		return st, nil
	}
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return st, dirErr(path)
		}
		// The *PathError already names the file.
		return st, fmt.Errorf("open board: %w", err)
	}
	defer f.Close()
	if !create {
		st.existed = true
	}
	st.exists = true
	var sys unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &sys); err != nil {
		return st, fmt.Errorf("open board %s: %w", path, err)
	}
	if sys.Mode&unix.S_IFMT == unix.S_IFDIR {
		return st, dirErr(path)
	}
	st.size, st.id = sys.Size, fileID{uint64(sys.Dev), sys.Ino}
	if st.size == 0 {
		return st, nil
	}
	return st, checkSQLiteHeader(f, path, st.size)
}

// checkSQLiteHeader checks the header of the SQLite file f (at path, size
// bytes long): a SQLite database whose fixed fields hold their fixed
// values, a whole number of pages long.
func checkSQLiteHeader(f io.Reader, path string, size int64) error {
	var head [100]byte // SQLite's database header
	if _, err := io.ReadFull(f, head[:]); err != nil || !bytes.Equal(head[:len(sqliteHeader)], sqliteHeader) {
		return corruptErr(path, "it is not a SQLite database", nil)
	}
	pageSize := int64(binary.BigEndian.Uint16(head[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return corruptErr(path, fmt.Sprintf("its header gives a page size of %d", pageSize), nil)
	}
	// The fields whose values SQLite's file format fixes (see
	// https://sqlite.org/fileformat.html, "The Database Header"); 0 stands
	// for a file whose schema is not written yet.
	schemaFormat, encoding := binary.BigEndian.Uint32(head[44:48]), binary.BigEndian.Uint32(head[56:60])
	if head[18] < 1 || head[18] > 2 || head[19] < 1 || head[19] > 2 || head[21] != 64 || head[22] != 32 || head[23] != 32 ||
		schemaFormat > 4 || encoding > 3 {
		return corruptErr(path, "its SQLite header is damaged", nil)
	}
	if size%pageSize != 0 {
		return corruptErr(path, fmt.Sprintf("it is %d bytes, not a whole number of %d-byte pages: it was cut short", size, pageSize), nil)
	}
	return nil
}

func dirErr(path string) error {
	return fmt.Errorf("board %s is a directory, not a board file; name a file, such as %s", path, filepath.Join(path, "board.db"))
}

func corruptErr(path, what string, cause error) error {
	msg := fmt.Sprintf("board %s: %s; move it aside (mv %s %s.bad) and bee will start a new board there", path, what, path, path)
	if cause != nil {
		return fmt.Errorf("%s: %w (%w)", msg, ErrCorrupt, cause)
	}
	return fmt.Errorf("%s: %w", msg, ErrCorrupt)
}

// A dbMode says how openDB opens the file: read-write (the zero value),
// or read-only, through the WAL or (immutable) the file alone.
type dbMode struct{ readOnly, immutable bool }

// openDB opens the pool. Every connection gets the same PRAGMAs, and
// BeginTx starts BEGIN IMMEDIATE: the board opens transactions only to
// write, and taking the write lock up front means a transaction never fails
// half-way to upgrade its lock.
func openDB(path string, busy time.Duration, mode dbMode) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	switch {
	case mode.readOnly:
		// See Read-only boards: the journal mode is the file's, WAL.
		q.Set("mode", "ro")
		if mode.immutable {
			q.Set("immutable", "1")
		}
	default:
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(on)")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(4)
	return db, nil
}

// migrate checks the file cheaply (its version and its schema can be read)
// and brings an older schema up to date. It reads through the write
// connection, which Open has made already: a second connection (the first
// of the read pool) would parse the schema once more before the board
// could be used.
func (b *Board) migrate() error {
	// Reads wait for a lock at most the busy timeout (SQLite's own); the
	// write bounds itself.
	ctx := b.ctx
	var v, tables int
	err := b.patiently(ctx, func() (err error) {
		v, tables, err = b.readVersion(ctx, b.wconn)
		return err
	})
	if err != nil {
		return err
	}
	if v < schemaVersion {
		err = b.write(ctx, "migrate", func(t wtx) error {
			// Read again under the lock: another process may have migrated.
			v, tables, err = b.readVersion(t.ctx, t.b.wconn)
			if err != nil {
				return err
			}
			if v == 0 && tables > 0 {
				return corruptErr(b.path, "it is a SQLite database but not a bee board", nil)
			}
			for next := v + 1; next <= schemaVersion; next++ {
				if err := t.script(migrations[next]); err != nil {
					return fmt.Errorf("migrate to schema %d: %w", next, err)
				}
				if err := t.reloadSchema(); err != nil {
					return fmt.Errorf("migrate to schema %d: %w", next, err)
				}
				if next == 1 {
					if err := t.script(`INSERT INTO meta (key, value) VALUES ('board_id', ?)`, newBoardID()); err != nil {
						return fmt.Errorf("migrate to schema 1: %w", err)
					}
				}
			}
			if v < schemaVersion {
				// PRAGMA takes no parameters; the version is our own integer.
				if err := t.script("PRAGMA user_version = " + strconv.Itoa(schemaVersion)); err != nil {
					return fmt.Errorf("set schema version: %w", err)
				}
				b.log.Info("board schema migrated", logkey.SchemaFrom, v, logkey.SchemaTo, schemaVersion)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return b.patiently(ctx, func() error {
		if err := b.checkSchema(); err != nil {
			return err
		}
		return b.readID(ctx)
	})
}

// readID reads the board's id.
func (b *Board) readID(ctx context.Context) error {
	err := b.wconn.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'board_id'`).Scan(&b.id)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return corruptErr(b.path, "it has no board id", nil)
		}
		return b.dbErr("read board id", err)
	}
	if len(b.id) != 8 {
		return corruptErr(b.path, fmt.Sprintf("its board id %q is malformed", b.id), nil)
	}
	return nil
}

// reloadSchema makes every connection read the schema again, this one
// included: a migration that edits sqlite_schema directly (version 3's
// loosened CHECKs) leaves the schema SQLite holds in memory stale until
// schema_version changes (https://sqlite.org/lang_altertable.html, "Making
// Other Kinds Of Table Schema Changes").
func (t wtx) reloadSchema() error {
	var v int64
	if err := t.b.wconn.QueryRowContext(t.ctx, "PRAGMA schema_version").Scan(&v); err != nil {
		return err
	}
	// PRAGMA takes no parameters; the version is SQLite's own integer.
	return t.script("PRAGMA schema_version = " + strconv.FormatInt(v+1, 10))
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readVersion returns the file's schema version and how many tables it
// holds, refusing a version newer than this bee's.
func (b *Board) readVersion(ctx context.Context, q queryer) (version, tables int, err error) {
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return 0, 0, b.dbErr("read schema version", err)
	}
	if version < 0 {
		return 0, 0, corruptErr(b.path, fmt.Sprintf("its schema version %d is negative", version), nil)
	}
	if version > schemaVersion {
		return 0, 0, fmt.Errorf("board %s has schema version %d, but this bee understands only up to %d: upgrade bee: %w",
			b.path, version, schemaVersion, ErrNewerSchema)
	}
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'").Scan(&tables); err != nil {
		return 0, 0, b.dbErr("read schema", err)
	}
	return version, tables, nil
}

func newBoardID() string {
	var raw [4]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(raw[:])
}

// dbErr wraps an error from the database for op, naming the file, and
// turns the SQLite codes a person can act on into ErrLocked or ErrCorrupt.
// Context errors pass through unwrapped by the board's sentinels.
func (b *Board) dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrLocked) || errors.Is(err, actions.ErrClosed) || errors.Is(err, ErrReplaced) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL:
			return b.lockedErr(op, err)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return b.markDamaged(corruptErr(b.path, "SQLite reports it damaged ("+op+")", err))
		case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_SCHEMA:
			// A statement that no longer fits the schema: a newer bee may
			// have migrated the file (see checkVersion).
			if v, ok := b.fileVersion(); ok && v > schemaVersion {
				return b.refuseNewer(v)
			}
		}
	}
	if detail, ok := badScan(err); ok {
		// A NOT NULL column read as NULL (a page SQLite read as zeros), or
		// the like.
		return corruptErr(b.path, "it holds a row that breaks bee's schema ("+detail+"; "+op+")", err)
	}
	if errors.Is(err, sql.ErrConnDone) && b.ctx.Err() != nil {
		return b.closed()
	}
	return fmt.Errorf("board %s: %s: %w", b.path, op, err)
}

// markDamaged refuses the file from now on: this Board answers every
// later call with err (the ErrCorrupt a SQLite report became), and the lock
// file marks the file damaged, so that every bee process's writes and
// every later Open refuse it too. It returns err.
func (b *Board) markDamaged(err error) error {
	if b.file != (fileID{}) {
		b.lock.noteDamaged(b.file)
	}
	if b.broken.CompareAndSwap(nil, &err) {
		b.log.Error("board file damaged; refusing it from now on", logkey.Err, err)
	}
	return err
}

// lockedErr says that op gave up waiting for the board's lock, and who
// holds it when that can be told. The error reports Temporary: trying
// again once the holder lets go succeeds.
func (b *Board) lockedErr(op string, cause error) error {
	var msg string
	if h, ok := b.lock.holder(); ok {
		held := ""
		if !h.since.IsZero() {
			held = fmt.Sprintf(" for %v", roundAge(time.Since(h.since)))
		}
		mend := "if that process is stopped (Ctrl-Z) or hung, resume or end it"
		if h.took != 0 {
			mend = fmt.Sprintf("it holds the lock until it exits or closes that descriptor: end it (find it with `fuser %s-lock`)", b.path)
		}
		msg = fmt.Sprintf("board %s is locked by %s%s: %s gave up after %v; %s",
			b.path, h, held, op, b.opts.BusyTimeout, mend)
	} else {
		msg = fmt.Sprintf("board %s: %s: another process has held it for more than %v; find it with `fuser %s %s-lock`",
			b.path, op, b.opts.BusyTimeout, b.path, b.path)
	}
	if cause != nil {
		return temporary(fmt.Errorf("%s: %w (%w)", msg, ErrLocked, cause))
	}
	return temporary(fmt.Errorf("%s: %w", msg, ErrLocked))
}

// A temporaryError is an error that waiting and trying again can mend
// (another process holds the board); its Temporary method says so, for
// callers that retry without knowing the board (bridge.Start).
type temporaryError struct{ error }

func (e temporaryError) Unwrap() error   { return e.error }
func (e temporaryError) Temporary() bool { return true }

func temporary(err error) error { return temporaryError{err} }

func isBadScan(err error) bool {
	_, ok := badScan(err)
	return ok
}

// badScan recognizes database/sql's complaint that a column read as a
// value bee's schema does not allow there (NULL in a NOT NULL column, text
// in an integer one: what a damaged page decodes to), and returns its
// detail.
func badScan(err error) (string, bool) {
	msg := err.Error()
	i := strings.Index(msg, "sql: Scan error on column")
	if i < 0 {
		return "", false
	}
	return msg[i+len("sql: "):], true
}
