// Package board is bee's embedded action board: one SQLite file, by default
// ~/.bee/board.db, shared by every bee process of the user on the machine.
// There is nothing to install or start; the first process to open the file
// creates it.
//
// The board promises:
//
//   - A claim is atomic across processes: no action is ever held by two
//     identities.
//   - An action's end commits with what it does to the actions that wait
//     for it (see actions.Blocked): the last prerequisite done opens them,
//     a prerequisite failed or cancelled cancels them, transitively; a
//     process killed meanwhile leaves all of it or none.
//   - Next offers the most urgent open action its caller may take
//     (addressed to anyone, to the caller's agent name, or to the caller
//     exactly; the oldest first within a priority), never a blocked one, and
//     returns within the timeout it is given, also while the database is
//     busy. A Next whose context ends as it claims gives the claim back:
//     nothing is held by a call whose answer nobody received.
//   - Depart gives back an identity's claims at once and re-addresses what
//     was addressed to that identity exactly to its agent name, so the
//     agent's next identity (after /clear, say) receives it.
//   - A process that dies without departing (SIGKILL) loses its claims once
//     its lease runs out ([Options.Lease], 60 s by default).
//   - Waiters in every process wake within milliseconds of a change that
//     makes an action claimable by them: the writer touches a file that the
//     Boards it concerns watch, with one fsnotify watcher each. An action
//     addressed to one agent wakes only the processes with a waiter of that
//     agent, so the other bridges waiting on the machine sleep on through
//     the post. While nothing changes a waiter only
//     looks at the database at its slow safety poll ([Options.SafetyPoll]),
//     and a member renews its lease ([Options.Renew]) only while it holds a
//     claim; nothing polls in a tight loop.
//   - Write transactions are serialized across processes by a lock file, so
//     competing writers queue in the kernel instead of backing off in
//     SQLite's busy handler, where some would starve.
//   - Every wait for that lock is bounded: an operation gives up after
//     [Options.BusyTimeout] with ErrLocked, naming the process that holds
//     the lock and for how long (a holder stopped with Ctrl-Z, say), and
//     Close never waits for another process.
//   - Reservations (see actions.Source) are granted whole or refused whole,
//     and end in the same transaction as their holder's departure, the
//     reap of its dead process, an explicit release or the end of the
//     action they serve. Writes are serialized, so no two holders ever
//     hold overlapping reservations one of which is exclusive.
//   - A file that is not a usable board (not a database, cut short, emptied,
//     damaged, or written by a newer bee) is refused with an error that
//     names it and says what to do. The board never silently starts over
//     empty. See Damage. A Board that finds, at a write, that a newer bee
//     has migrated the file since it opened it writes nothing and refuses
//     every later call (ErrNewerSchema).
//   - A Board serves the file it opened and never another: see Moving the
//     file.
//
// The board does not delete finished actions (the file keeps the history:
// an action that ends moves out of the table claims walk, in the
// transaction that ends it, so a long history does not slow the live
// board), does not work across machines, and makes no promise for a file on a
// network filesystem, where SQLite's WAL mode and the lock file do not hold.
// Leases compare the wall clock of processes on one machine, so a clock
// set forward by more than a lease ends leases early (their holders keep
// working, but may find their actions taken when they finish).
//
// # Files
//
// Next to the database at path live SQLite's own path-wal and path-shm, the
// write lock path-lock, the file path-watching that Boards running
// Changes hold a shared lock on, and the directory path-notify holding
// the files whose changes wake waiters: "wake" (an action may have become
// claimable by anyone), "ended" (an action ended, for every waiter of
// ends) and "change" (an action changed in another way; only Changes
// cares, and only Boards running Changes are told); the folder
// "for-<agent>" with "wake" (an action may have become claimable by that
// agent) and "ended" (an action posted by that agent ended; "for-~people"
// for a person's), which only the Boards with a waiter of that agent
// watch; and the folder "every" with "wake-<agent>" and "ended-<agent>",
// the same changes for the Boards that watch every change. Deleting or
// replacing the notify files, folders or directory is harmless. (Bees
// before the folders touched "wake-<agent>" and "ended-<agent>" at the
// top: see notifier for how bees of both kinds hear each other.) The
// lock file also holds a short text record: who took the lock last and
// when, which database file the -wal and -shm files belong to, and a file
// found damaged.
//
// # Moving the file
//
// SQLite names its -wal and -shm files after the path, not the file, so a
// database file moved away or deleted while processes have it open would
// split the board: they would go on writing to the old file, and a new
// file at the path would share (and read) the old one's WAL. Instead, a
// Board checks at every call, and at once when the file's inode reports a
// rename or unlink, that its path still names the file it opened; when it
// does not, the Board stops for good (every call returns ErrReplaced,
// naming the path and what happened) and closes its database, letting go
// of the old file's siblings. Open admits a new file at the path only once
// no process holds them any more: it waits up to the busy timeout, then
// fails with ErrLocked naming those processes. A WAL left by another file
// (its process killed) is set aside as path-wal.orphaned-<time>, never
// applied. So `mv board.db board.db.bad` while bridges run leaves the
// moved file whole and a new, working board at the path; the bridges must
// be restarted to use it.
//
// # Damage
//
// Open refuses a file whose size is not a whole number of pages (cut
// short) and a file emptied to 0 bytes that was a board (the lock file's
// record or a WAL says so; a new or moved-aside path has neither). A Board
// that SQLite reports damaged at any call refuses every later call with
// ErrCorrupt and marks the file damaged in the lock file, so that every
// bee process's writes, and every later Open, refuse it too. Each refusal
// says to move the file aside; bee then starts a new board at the path.
//
// # Who may post
//
// Post takes the poster as an actions.Poster. Agents post as their
// identity; people post as "user:<name>" (see actions.User), which the
// board accepts as a poster but never as a claimant.
//
// # The engine
//
// What a board does whatever its storage (the waits of Next, Notice,
// Changes and Await, the rules of each call, reaping dead members) is the
// engine's (actions/internal/engine), shared with the PostgreSQL board;
// this package holds the file's SQL, its write lock, its notify files and
// the renewal of its members' leases.
package board

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"

	_ "modernc.org/sqlite" // registers the "sqlite" driver: pure Go, no cgo
)

// EnvPath names the environment variable that overrides the board's path.
const EnvPath = "BEE_BOARD"

// Defaults for the zero values of Options.
const (
	DefaultLease       = 60 * time.Second
	DefaultSafetyPoll  = 60 * time.Second
	DefaultBusyTimeout = 5 * time.Second
	DefaultPageSize    = 100
)

// Errors the board returns besides the actions sentinels, wrapped with the
// detail that names the file. Those every board shares are the actions
// package's own (actions.ErrClosed, actions.ErrTooLong, say).
var (
	// ErrLocked: another process held the board's lock for longer than
	// Options.BusyTimeout (the error names it when it can be told), or
	// still holds the files of a board file that was moved away. Errors
	// wrapping it have a Temporary method that reports true: trying again
	// once that process lets go succeeds.
	ErrLocked = errors.New("board is locked")
	// ErrCorrupt: the file is not a database, was cut short or emptied, or
	// SQLite reports it damaged. Once a Board has seen damage it refuses
	// every later call, and every bee process refuses the file (see
	// Damage).
	ErrCorrupt = errors.New("board file is not a usable database")
	// ErrReplaced: the board's file was moved away, deleted or replaced
	// while the Board had it open; the Board has stopped (see Moving the
	// file). Open the board again.
	ErrReplaced = errors.New("board file was moved, deleted or replaced")
	// ErrNewerSchema: the file was written by a newer bee: at Open, or by
	// any later call once a write (or a read that no longer fits the
	// schema) found it migrated by a newer bee while it was open. The
	// Board then refuses every call: upgrade bee.
	ErrNewerSchema = errors.New("board file is from a newer bee")
)

// DefaultPath returns the board's path: $BEE_BOARD when set, else
// ~/.bee/board.db. It fails only when $BEE_BOARD is unset and the home
// directory is unknown.
func DefaultPath() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("board path: %w (set %s)", err, EnvPath)
	}
	return filepath.Join(home, ".bee", "board.db"), nil
}

// Options configure a Board. The zero value (or a nil *Options) gives the
// defaults; Open copies the struct, so changing it afterwards has no effect.
type Options struct {
	// Logger receives the board's logs. Nil discards them.
	Logger *slog.Logger
	// Lease is how long a member's claims survive without a renewal: a
	// process that dies without departing (SIGKILL) loses its claims this
	// long after its last renewal. Zero means DefaultLease (60 s): a clean
	// end gives claims back at once, so the lease only bounds the rare
	// crash. A member renews only while it holds a claim (made through this
	// Board); claiming refreshes a lease that has run low.
	Lease time.Duration
	// Renew is how often the lease of a joined member that holds a claim is
	// extended (an idle member's only daily, to keep its row). Zero means
	// Lease/3. It must be at most Lease/2, or Open refuses the options.
	Renew time.Duration
	// SafetyPoll bounds how long a waiter sleeps without looking at the
	// database, in case a wake-up was lost. Zero means DefaultSafetyPoll
	// (60 s): wake-ups come from the notify files, so the poll is only a
	// backstop, and each look costs CPU in every idle bridge. A bridge's
	// waits last at most 60 s and each new one looks first, so for bridges
	// the wait's own bound is the backstop.
	SafetyPoll time.Duration
	// BusyTimeout bounds how long one operation waits for another process
	// holding the board's lock before it fails with ErrLocked. Zero means
	// DefaultBusyTimeout (5 s).
	BusyTimeout time.Duration
	// PageSize bounds the records of one List or Changes page. Zero means
	// DefaultPageSize (100). A page also stops once its text passes 1 MiB.
	PageSize int
	// Clock is the board's time for leases, renewals and every time it
	// records (see actions.Clock). Nil means the wall clock. Processes on
	// one machine compare their clocks' leases.
	Clock actions.Clock

	// Test hooks, settable only inside this package.

	// afterClaim runs right after a claim commits, before Next looks at its
	// context: a test cancels the context here to reach the moment a claim
	// has committed but nobody will receive it.
	afterClaim func(actions.Record)
	// beforeSleep runs each time a Next (or a Notice or an Await), having
	// found nothing, is about to sleep: a test waits for it to know the next wake-up must come
	// through the notifier.
	beforeSleep func()
	// noWriteLock leaves writers to SQLite's busy handler instead of the
	// lock file (for measuring the difference).
	noWriteLock bool
	// holdingLock runs in every write right after it has taken the write
	// lock: a test stops its process there.
	holdingLock func()
	// noVersionCheck leaves out the schema version check of every write
	// (see checkVersion), for measuring its cost.
	noVersionCheck bool
}

// A Board is an open board file. Its methods are safe for concurrent use.
// They are actions.Board's (Name, Join, Depart, Next, Notice, Await, List,
// ListFiltered, Get, Post, Finish, Fail, Release, Cancel, Answer,
// Decline, Readdress, SetWaiter, Reserve, ReleasePaths, Reservations,
// Conflicts, Members, Head, Changes and Close; see actions.Source and
// actions.Board for what each promises), served by the board engine
// (actions/internal/engine) over this file's store, and Path, Created and Location.
type Board struct {
	*engineCore

	// Fixed at Open.
	path   string
	opts   Options
	clock  actions.Clock // opts.Clock, never nil
	log    *slog.Logger
	db     *sql.DB
	wconn  *sql.Conn // the one connection writes use (they are serialized by lock)
	wstmts stmtCache // prepared on wconn
	rstmts stmtCache // prepared on the pool, for reads
	id     string    // the board's id, carried in its cursors
	lock   *writeLock
	notify *notifier
	fwatch *fileWatch   // nil when the file cannot be watched
	writes atomic.Int64 // writes committed, for checkpoint
	file   fileID       // the database file, bound by admit before any query
	hub    *engine.Hub  // the local waiters

	// broken, once set, is the answer of every call: the file was found
	// damaged (ErrCorrupt) or replaced (ErrReplaced).
	broken   atomic.Pointer[error]
	stopping atomic.Bool   // stop has begun closing the Board
	opened   chan struct{} // closed when Open has returned; stop closes only after it
	checked  atomic.Int64  // when a call last checked the file (unix ns)

	created bool // see Created

	// readOnly, when set, says why this user cannot write the board: the
	// Board only reads (see Read-only boards in readonly.go), and every
	// write returns ErrReadOnly. immutable: it reads the file alone, there
	// being no WAL when it opened.
	readOnly  *readOnlyReason
	immutable bool

	// life is the Board's lifetime, ended by Close; ctx is its context,
	// which ends renewals and aborts their writes. Close is the only
	// exception to "ctx comes first".
	life *engine.Life
	ctx  context.Context

	mu       sync.Mutex // guards renewals and held
	renewals map[identity.ID]*renewal
	// held counts, per identity, the claims made through this Board and
	// not finished or released through it since. A lease matters only
	// while its member holds a claim, so renewals write only then: an idle
	// bridge costs no CPU. The count can only be too high (a claim
	// reclaimed or departed elsewhere), which costs a renewal, never a
	// claim.
	held map[identity.ID]int
}

// engineCore is the engine a Board embeds, under a name that keeps the
// field unexported while its methods (the actions.Board API) are the
// Board's.
type engineCore = engine.Engine

var _ actions.Board = (*Board)(nil)

// Open opens the board at path, creating it (and its directory, mode 0700)
// when missing, and migrating an older schema. It refuses, with an error
// naming the file, a file that is not a database or is damaged (ErrCorrupt:
// move it aside), one from a newer bee (ErrNewerSchema: upgrade bee) and one
// locked by another process beyond the busy timeout (ErrLocked). The caller
// must Close the Board.
func Open(path string, opts *Options) (_ *Board, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	set, err := engine.Settings{Logger: o.Logger, Lease: o.Lease, Renew: o.Renew, SafetyPoll: o.SafetyPoll, PageSize: o.PageSize, Clock: o.Clock}.
		Filled(engine.Defaults{Lease: DefaultLease, SafetyPoll: DefaultSafetyPoll, PageSize: DefaultPageSize})
	if err != nil {
		return nil, err
	}
	o.Logger, o.Lease, o.Renew, o.SafetyPoll, o.PageSize, o.Clock = set.Logger, set.Lease, set.Renew, set.SafetyPoll, set.PageSize, set.Clock
	if path == "" {
		return nil, errors.New("open board: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open board %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open board %s: create its directory: %w", abs, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, dirErr(abs) // before a lock file appears next to it
	}
	b := newBoard(abs, o, set)
	// Deferred first, so it runs last: a stop that the file watcher began
	// meanwhile closes the Board only once Open is done with its fields.
	defer close(b.opened)
	if err := b.open(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// newBoard makes the Board of the file abs, its engine included, before
// anything is opened.
func newBoard(abs string, o Options, set engine.Settings) *Board {
	b := &Board{
		path:     abs,
		opts:     o,
		clock:    o.Clock,
		log:      o.Logger.With(logkey.Source, "board", logkey.Path, abs),
		life:     engine.NewLife(),
		renewals: make(map[identity.ID]*renewal),
		held:     make(map[identity.ID]int),
		opened:   make(chan struct{}),
	}
	b.ctx = b.life.Context()
	b.hub = engine.NewHub(func(e engine.Event) {
		if b.notify != nil {
			b.notify.hear(e)
		}
	}, false)
	b.engineCore = engine.New(engine.Config{Settings: set, Log: b.log, Life: b.life, Hub: b.hub,
		OnceBound: o.BusyTimeout, HotClaims: true, Warm: b.warm, AfterClaim: o.afterClaim, BeforeSleep: o.beforeSleep}, (*store)(b))
	return b
}

// open opens the Board's files: the write lock, the database (admitted,
// set up and migrated), the watch on the file and the notifier.
func (b *Board) open() (err error) {
	if b.readOnly = readOnly(b.path); b.readOnly != nil {
		return b.openReadOnly()
	}
	if b.lock, err = openWriteLock(b.path+"-lock", b.opts.noWriteLock); err != nil {
		return fmt.Errorf("open board %s: %w", b.path, err)
	}
	b.lock.holding = b.opts.holdingLock
	release, err := b.admit()
	if err != nil {
		return err
	}
	if release != nil {
		// Runs before Close, which waits for the lock.
		defer func() {
			if release != nil {
				release()
			}
		}()
	}
	if b.db, err = openDB(b.path, b.opts.BusyTimeout, dbMode{}); err != nil {
		return fmt.Errorf("open board %s: %w", b.path, err)
	}
	if b.wconn, err = b.db.Conn(b.ctx); err != nil {
		return b.dbErr("connect", err)
	}
	if release != nil {
		// The first connection has written a new file's header.
		b.lock.noteDB(b.file)
		release()
		release = nil
	}
	if err := b.setUp(); err != nil {
		return err
	}
	return b.watch()
}

// openReadOnly is open for a Board that cannot write (see readOnlyReason):
// it reads the lock file's record, admits the file without the lock and
// opens the database read-only; nothing on disk is made or changed.
func (b *Board) openReadOnly() (err error) {
	if b.lock, err = openLockReadOnly(b.path + "-lock"); err != nil {
		return fmt.Errorf("open board %s: %w", b.path, err)
	}
	if err := b.admitReadOnly(); err != nil {
		return err
	}
	if b.db, err = openDB(b.path, b.opts.BusyTimeout, dbMode{readOnly: true, immutable: b.immutable}); err != nil {
		return fmt.Errorf("open board %s: %w", b.path, err)
	}
	if b.wconn, err = b.db.Conn(b.ctx); err != nil {
		return b.dbErr("connect", err)
	}
	if err := b.setUp(); err != nil {
		return err
	}
	return b.watch()
}

// watch starts the watch on the file and the notifier. A read-only Board
// whose notify files are missing (none can be made) does without: its
// waits fall back to the safety poll.
func (b *Board) watch() (err error) {
	if b.fwatch, err = watchFile(b.path, func() { _ = b.checkFile() }, b.life); err != nil {
		// Each call still checks the file; only an idle Board notices late.
		b.log.Warn("cannot watch the board file; a move or delete shows at the next call", logkey.Err, err)
	}
	if b.notify, err = newNotifier(b.path+"-notify", b.path+"-watching", b.log, b.hub, b.life, b.readOnly != nil); err != nil {
		if b.readOnly == nil {
			return fmt.Errorf("open board %s: %w", b.path, err)
		}
		b.log.Warn("cannot watch the read-only board's notify files; waits fall back to the safety poll", logkey.Err, err)
		b.notify = nil
	}
	return nil
}

// setUp sets the write connection up, prepares the statement caches and
// migrates the schema.
func (b *Board) setUp() error {
	// See begin: the write connection waits for SQLite's lock only when
	// a write cannot begin at once.
	if _, err := b.wconn.ExecContext(b.ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return b.dbErr("connect", err)
	}
	// See checkpoint: no checkpoints inside commits.
	if _, err := b.wconn.ExecContext(b.ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
		return b.dbErr("connect", err)
	}
	b.wstmts.prepare = b.wconn.PrepareContext
	b.rstmts.prepare = b.db.PrepareContext
	return b.migrate()
}

// Path returns the absolute path of the board's database file.
func (b *Board) Path() string { return b.path }

// Created reports whether this Open created the board's file: it did not
// exist before. Of several processes opening a missing board at once, at
// most one sees true. A command that creates boards says so, so that a
// mistyped path does not pass unnoticed as an empty board.
func (b *Board) Created() bool { return b.created }

// Location implements actions.Board: the database file's absolute path.
func (b *Board) Location() string { return b.path }

// closed returns the error every call returns from now on, or nil: the
// damage or replacement that stopped the Board, or ErrClosed, wrapped with
// the file, once Close has begun. It checks that the path still names the
// Board's file (see checkFile).
func (b *Board) closed() error {
	if err := b.broken.Load(); err != nil {
		return *err
	}
	if b.ctx.Err() != nil {
		return fmt.Errorf("board %s: %w", b.path, actions.ErrClosed)
	}
	// The watch reports moves at once; this check is for what it cannot
	// see (the directory moved, say), and need not cost a stat per call.
	if now := time.Now().UnixNano(); now-b.checked.Load() >= int64(fileCheckEvery) {
		b.checked.Store(now)
		return b.checkFile()
	}
	return nil
}

// fileCheckEvery is how often, at most, a call checks that the board's
// path still names its file (see closed).
const fileCheckEvery = 100 * time.Millisecond

// nowMS is the board's clock (Options.Clock) in Unix milliseconds, the
// unit every time column holds. Leases compare these across processes on
// one machine.
func (b *Board) nowMS() int64 { return b.clock.Now().UnixMilli() }

// wallMS is the wall clock in Unix milliseconds, for what the board's
// clock does not govern (the lock file's records).
func wallMS() int64 { return time.Now().UnixMilli() }

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
