// Package pgboard is bee's action board on a PostgreSQL server: the same
// contract as the embedded board (actions/board), for agents on several
// machines. Every bridge and bee command that opens the same database
// shares one board.
//
// The board promises what the embedded board does:
//
//   - A claim is atomic: SELECT ... FOR UPDATE SKIP LOCKED inside one
//     transaction, so no action is ever held by two identities, and
//     competing claimers skip each other's rows instead of queueing.
//   - An action's end commits with what it does to the actions that wait
//     for it, as on the embedded board; two prerequisites ended at once
//     by two processes open their waiter exactly once (see plans.go).
//   - Next offers the most urgent open action its caller may take (the
//     oldest first within a priority), never a blocked one, and returns
//     within its timeout, also while the server is unreachable (it then
//     finds nothing). A Next whose context ends as it claims gives the
//     claim back.
//   - Depart gives back an identity's claims at once and re-addresses what
//     was addressed to it exactly to its agent name.
//   - A bridge that dies without departing loses its claims: at once when
//     it ran on this machine (its pid is gone), else once its lease runs out
//     ([Options.Lease], 60 s by default). Every member renews its lease
//     while it lives, idle or not, so on this board an expired lease means a
//     dead (or cut-off) bridge. Leases are judged by the server's clock
//     (unless [Options.Clock] says otherwise), so the machines' clocks need
//     not agree, and a server restart gives every member a full lease to
//     renew before any is judged.
//   - Waiters wake within milliseconds of a change in any process, on any
//     machine: writers NOTIFY in the transaction that makes the change, and
//     the Boards of one machine LISTEN through one dedicated connection
//     (the machine's listener, see relay.go; or each on its own, with
//     [Options.OwnListener]), to the channels of the agents they have
//     waiters for and of everyone, so a post for one agent reaches only the
//     Boards that wait for it; the channel of every change (for bee watch
//     and Await) is notified only while some Board listens there (see
//     Board.notify). The notification is a hint: waiters also look at the
//     database every [Options.SafetyPoll], and every waiter of a Board
//     wakes when it listens anew after a loss (a connection re-made with
//     backoff, a machine's listener that ended or stalled).
//   - A transaction that fails because the connection dropped or the server
//     restarted is retried (within [Options.Retry] and the caller's
//     context); one whose commit went unanswered is resolved by asking the
//     server whether it committed, so nothing is done twice.
//   - Every call ends by its context's deadline, and every wait by its
//     timeout, whatever the server does: one stopped (SIGSTOP) or cut off
//     by a partition, which keeps connections open and answers nothing,
//     makes a call fail with ErrUnreachable, or a wait find nothing, by
//     then. A call whose commit was sent but not answered by then fails
//     saying the change may have been made; a claim or a telling of an
//     outcome cut off so is resolved in the background, and given back (or
//     told again) if it committed, so nothing is held by, or told to, a
//     call that gave up.
//   - The schema is versioned (table bee_schema_version); Open migrates an
//     older one, under an advisory lock, and refuses a newer one with what
//     to do. A Board that finds, at a write, that a newer bee has migrated
//     the database since it opened it writes nothing and refuses every
//     later call (ErrNewerSchema).
//   - The URL's password never appears in an error, a log or Location.
//   - Reservations as on the embedded board; the transactions that decide
//     on one repository's reservations are serialized by a transaction
//     advisory lock on its name, so no two holders ever hold overlapping
//     reservations one of which is exclusive.
//
// The board does not delete finished actions (an action that ends moves
// to bee_ended_actions in the transaction that ends it, out of the table
// claims walk), and keeps its tables (all
// named bee_*) in the first schema of the role's search_path: give the URL
// a search_path (postgres://.../db?search_path=bee) to keep them apart.
package pgboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Defaults for the zero values of Options.
const (
	DefaultLease          = 60 * time.Second
	DefaultSafetyPoll     = 10 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultRetry          = 15 * time.Second
	DefaultPageSize       = 100
	DefaultMaxConns       = 4
)

// Errors the board returns besides the actions sentinels.
var (
	// ErrNewerSchema: the database was set up by a newer bee.
	ErrNewerSchema = errors.New("board database is from a newer bee")
	// ErrNotBoard: the database holds bee tables that are not a bee board.
	ErrNotBoard = errors.New("database is not a usable bee board")
	// ErrUnreachable: the server could not be reached, or stopped
	// answering. The error that wraps it says why, as far as it can be
	// told (nothing listens, the host is unknown, no answer in time).
	ErrUnreachable = errors.New("PostgreSQL server unreachable")
	// ErrTLS: the connection's TLS failed: the server does not offer it
	// though the URL's sslmode asks for it, or its certificate failed the
	// check sslmode asks for. The error that wraps it says which, and what
	// to do.
	ErrTLS = errors.New("TLS with the PostgreSQL server failed")
	// ErrLogin: the server refused the URL's role or password.
	ErrLogin = errors.New("PostgreSQL login refused")
	// ErrNoBoard: the database has no board yet, and Options.NoCreate
	// forbade making one.
	ErrNoBoard = errors.New("no board in the database")
)

// IsLocation reports whether location names a PostgreSQL board: a
// postgres:// or postgresql:// URL.
func IsLocation(location string) bool {
	l := strings.ToLower(location)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Options configure a Board. The zero value (or a nil *Options) gives the
// defaults; Open copies the struct.
type Options struct {
	// Logger receives the board's logs. Nil discards them.
	Logger *slog.Logger
	// Lease is how long a member stays live without renewing: a bridge on
	// another machine that dies without departing loses its claims this long
	// after its last renewal. Zero means DefaultLease (60 s).
	Lease time.Duration
	// Renew is how often a joined member's lease is renewed, idle or not.
	// Zero means Lease/3; it must be at most Lease/2.
	Renew time.Duration
	// SafetyPoll bounds how long a waiter sleeps without looking at the
	// database, in case a notification was lost. Zero means
	// DefaultSafetyPoll (10 s).
	SafetyPoll time.Duration
	// ConnectTimeout bounds Open's first connection, and each later one.
	// Zero means DefaultConnectTimeout (10 s), unless the URL sets
	// connect_timeout.
	ConnectTimeout time.Duration
	// Retry bounds how long one operation keeps retrying while the server
	// is unreachable or restarting. Zero means DefaultRetry (15 s). Next,
	// Notice and Await retry within their own timeout instead.
	Retry time.Duration
	// PageSize bounds the records of one List or Changes page. Zero means
	// DefaultPageSize (100).
	PageSize int
	// MaxConns bounds the pool's connections; the listener holds one more.
	// Zero means DefaultMaxConns (4).
	MaxConns int
	// Clock is the board's time for leases, renewals and every time it
	// records (see actions.Clock). Nil means the server's clock
	// (clock_timestamp()) for the times, and the runtime's timers for the
	// waits they decide: the machines sharing a server disagree about the
	// time, the server is the one clock they all read. Every statement
	// takes the time as a parameter that is NULL, the server's clock, by
	// default, so a Clock changes no SQL. A test sets a manual clock, shared
	// by every Board of its database, to drive leases without sleeping;
	// members of other processes then judge by another clock.
	Clock actions.Clock
	// OpenBy, when set, is when Open must have returned, whatever the
	// server does (ErrUnreachable, when it did not answer by then): it
	// caps ConnectTimeout, and bounds the schema's check, for a command
	// that must end by a deadline (bee wait --timeout).
	OpenBy time.Time
	// NoCreate makes Open refuse a database without bee's tables
	// (ErrNoBoard) instead of creating them: for people reading a board,
	// so that a mistyped URL never shows an empty one.
	NoCreate bool
	// MachineClaimer sends the Board's claims through its machine's
	// claimer (see machine.go), as $BEE_PG_CLAIMER=on does for every
	// Board of a process. Off by default: on a busy machine it measured
	// slower than each Board claiming on its own connections.
	MachineClaimer bool
	// OwnListener makes the Board LISTEN on a connection of its own, as
	// $BEE_PG_LISTENER=own does for every Board of a process, rather
	// than through its machine's listener (see relay.go).
	OwnListener bool

	// Test hooks, settable only inside this package.

	// hostKey replaces the machine's key (see hostKey), so that a test can
	// run members of several "machines" in one.
	hostKey string
	// beforeSleep runs each time a Next, Notice or Await, having found
	// nothing, is about to sleep.
	beforeSleep func()
	// afterClaim runs right after a claim commits, before Next looks at its
	// context.
	afterClaim func(actions.Record)
	// inClaim runs inside the claim transaction, after the action's row is
	// locked and before the commit, with the transaction's backend pid.
	inClaim func(backendPID uint32)
	// beforeCommit runs in every write transaction right before its
	// COMMIT is sent.
	beforeCommit func()
	// beforeBatch runs in the machine's claimer before each batch is
	// sent, with the number of its claims.
	beforeBatch func(n int)
	// afterBatch runs in the machine's claimer once a batch has
	// committed, before its claimants hear.
	afterBatch func(n int)
	// noVersionCheck leaves out the schema version check of every write
	// (see firstTrip), for measuring its cost.
	noVersionCheck bool
	// tracer traces the connections (the pool's and the listener's), for
	// counting round trips.
	tracer pgx.QueryTracer
}

// A Board is an open PostgreSQL board. Its methods are safe for concurrent use.
// They are actions.Board's (Name, Join, Depart, Next, Notice, Await, List,
// ListFiltered, Get, Post, Finish, Fail, Release, Cancel, Answer,
// Decline, Readdress, SetWaiter, Reserve, ReleasePaths, Reservations,
// Conflicts, Members, Head, Changes and Close; see actions.Source and
// actions.Board for what each promises), served by the board engine
// (actions/internal/engine) over this database's store, and Created and Location.
type Board struct {
	*engineCore

	// Fixed at Open.
	location string // the URL without its password
	password string // the URL's password, to scrub from errors; "" if none
	sslmode  string // the URL's sslmode, "" when it has none, for errors
	opts     Options
	log      *slog.Logger
	pool     *pgxpool.Pool
	id       string // the board's id, carried in its cursors and channel names
	host     string // this machine's name, for people
	hostKey  string // where this process's pids mean something
	listen   *listener
	hub      *engine.Hub // the local waiters
	created  bool        // this Open created the board's tables
	// clock makes the timers of the waits leases decide: Options.Clock,
	// else the wall clock (see now for the times).
	clock actions.Clock
	// skew is how far Options.Clock is ahead of the server's clock,
	// measured once, at Open; 0 without one. It puts the server's start on
	// the board's clock (see leaseEnd). A clock that does not follow the
	// wall clock (a test's manual one) thus sees a later restart where the
	// wall clock would have put it, counted from Open.
	skew time.Duration

	// life is the Board's lifetime, ended by Close; ctx is its context,
	// which ends renewals, the listener and calls in progress.
	life *engine.Life
	ctx  context.Context

	// broken, once set, is the answer of every call: a newer bee migrated
	// the database (see refuseNewer).
	broken atomic.Pointer[error]

	changeMu      sync.Mutex // guards changeBusy and changePending
	changeBusy    bool       // sendChanges runs
	changePending bool       // a change came since its last notification

	procs procCache // this machine's members, as Processes read them

	// orphansAt is when a claim last looked for orphaned claims (Unix
	// nanoseconds; see lookForOrphans).
	orphansAt atomic.Int64

	// The machine's claimer (see machine.go). machineName is its socket,
	// "" when this Board claims alone; connConfig makes its connection.
	machineName       string
	connConfig        *pgx.ConnConfig
	machineMu         sync.Mutex // guards the election
	machine           atomic.Pointer[machineClaimer]
	machineQuietUntil atomic.Int64 // Unix nanoseconds: claim alone until then
	// machineGone is the backend of a claimer whose answer this Board
	// gave up on (and which its settling ended): not to be sent to again.
	machineGone atomic.Uint32

	mu      sync.Mutex                     // guards members
	members map[identity.ID]actions.Member // joined through this Board, renewed by it
}

// engineCore is the engine a Board embeds, under a name that keeps the
// field unexported while its methods (the actions.Board API) are the
// Board's.
type engineCore = engine.Engine

var _ actions.Board = (*Board)(nil)

// Open opens the board in the database location names (a postgres:// or
// postgresql:// URL), setting it up or migrating it when needed. It fails
// within Options.ConnectTimeout when the server cannot be reached
// (ErrUnreachable), and refuses a wrong role or password (ErrLogin), a
// database from a newer bee (ErrNewerSchema) and one whose bee tables are
// not a board (ErrNotBoard), each with an error that names the server and
// says what to do, and never holds the password. The caller must Close the
// Board.
func Open(location string, opts *Options) (*Board, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	set, err := engine.Settings{Logger: o.Logger, Lease: o.Lease, Renew: o.Renew, SafetyPoll: o.SafetyPoll, PageSize: o.PageSize, Clock: o.Clock}.
		Filled(engine.Defaults{Lease: DefaultLease, SafetyPoll: DefaultSafetyPoll, PageSize: DefaultPageSize})
	if err != nil {
		return nil, err
	}
	o.Logger, o.Lease, o.Renew, o.SafetyPoll, o.PageSize = set.Logger, set.Lease, set.Renew, set.SafetyPoll, set.PageSize
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if !o.OpenBy.IsZero() {
		o.ConnectTimeout = max(min(o.ConnectTimeout, time.Until(o.OpenBy)), time.Millisecond)
	}
	loc, password := redactURL(location)
	if !IsLocation(location) {
		return nil, fmt.Errorf("open board %s: not a postgres:// or postgresql:// URL", loc)
	}
	cfg, err := poolConfig(location, loc, &password, o)
	if err != nil {
		return nil, err
	}
	b := newBoard(loc, password, o, set)
	b.sslmode = sslmodeOf(location)
	if err := b.open(cfg); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// poolConfig is the pool's configuration for the URL location (loc
// without its password), taking the password the URL holds.
func poolConfig(location, loc string, password *string, o Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(location)
	if err != nil {
		return nil, scrub(fmt.Errorf("open board %s: the URL does not parse: %w", loc, err), *password)
	}
	if cfg.ConnConfig.Password != "" {
		*password = cfg.ConnConfig.Password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || !o.OpenBy.IsZero() && cfg.ConnConfig.ConnectTimeout > o.ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "bee"
	}
	// The board's statements are short; JIT compiling one costs far more
	// than running it, and a plan the claim costs high on purpose (see
	// ptx.Take) would be compiled, seconds on a busy machine, while it
	// holds a repository's lock.
	if _, ok := cfg.ConnConfig.RuntimeParams["jit"]; !ok {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	cfg.MaxConns = int32(o.MaxConns)
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	return cfg, nil
}

// newBoard makes the Board of the database at loc, its engine included,
// before anything is opened.
func newBoard(loc, password string, o Options, set engine.Settings) *Board {
	b := &Board{
		location: loc,
		password: password,
		opts:     o,
		log:      o.Logger.With(logkey.Source, "pgboard", logkey.Path, loc),
		life:     engine.NewLife(),
		members:  make(map[identity.ID]actions.Member),
		clock:    set.Clock,
	}
	b.ctx = b.life.Context()
	b.host, b.hostKey = hostKey()
	if o.hostKey != "" {
		b.hostKey = o.hostKey
	}
	// Every end reaches other processes only on the change channel, which
	// carries every change (see Board.notify): a waiter for every end
	// wakes at each change and looks.
	b.hub = engine.NewHub(func(e engine.Event) { b.listen.hear(e) }, true)
	b.engineCore = engine.New(engine.Config{Settings: set, Log: b.log, Life: b.life, Hub: b.hub,
		OnceBound: o.Retry, AfterClaim: o.afterClaim, BeforeSleep: o.beforeSleep}, (*store)(b))
	return b
}

// open connects, migrates, measures the clock's skew, and starts the
// listener and the renewer, by Options.OpenBy when set.
func (b *Board) open(cfg *pgxpool.Config) (err error) {
	if b.pool, err = pgxpool.NewWithConfig(b.ctx, cfg); err != nil {
		return b.scrub(fmt.Errorf("open board %s: %w", b.location, err))
	}
	ctx := b.ctx
	if !b.opts.OpenBy.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, b.opts.OpenBy)
		defer cancel()
	}
	start := time.Now()
	defer func() {
		if err != nil && ctx.Err() != nil && b.ctx.Err() == nil && !errors.Is(err, ErrUnreachable) {
			err = b.scrub(&reachError{sentinel: ErrUnreachable, cause: err,
				msg: fmt.Sprintf("open board %s: the PostgreSQL server has not answered for %v; check that it runs and is reachable",
					b.location, time.Since(start).Round(100*time.Millisecond))})
		}
	}()
	if err := b.ping(ctx, cfg.ConnConfig); err != nil {
		return err
	}
	if err := b.migrate(ctx); err != nil {
		return err
	}
	if b.opts.Clock != nil {
		if err := b.measureSkew(ctx); err != nil {
			return err
		}
	}
	b.listen = newListener(b, cfg.ConnConfig)
	b.connConfig = cfg.ConnConfig
	if b.claimsWithMachine() {
		b.machineName = machineSocket("pgclaim", b.hostKey, b.location, b.id)
	}
	// The first renewal tick is armed before Open returns (see renewLoop).
	tick := b.clock.NewTimer(b.opts.Renew)
	b.life.Go(b.listen.run)
	if !b.life.Go(func() { b.renewLoop(tick) }) {
		tick.Stop()
	}
	return nil
}

// claimsWithMachine says whether the Board's claims may go through its
// machine's claimer: with Options.MachineClaimer or $BEE_PG_CLAIMER=on,
// and no test hook that must run in the claim's own transaction.
func (b *Board) claimsWithMachine() bool {
	o := b.opts
	return (o.MachineClaimer || os.Getenv(EnvClaimer) == "on") && o.inClaim == nil && o.beforeCommit == nil
}

// measureSkew sets b.skew: how far Options.Clock is ahead of the server's
// clock.
func (b *Board) measureSkew(ctx context.Context) error {
	var server time.Time
	err := b.read(ctx, "read the server's clock", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server)
	})
	if err != nil {
		return fmt.Errorf("open board %s: %w", b.location, err)
	}
	b.skew = b.opts.Clock.Now().Sub(server)
	return nil
}

// now is the time a statement takes as the parameter of nowSQL: nil, the
// server's clock, unless Options.Clock is set.
func (b *Board) now() any {
	if b.opts.Clock == nil {
		return nil
	}
	return b.opts.Clock.Now()
}

// nowSQL is the board's time in a statement whose parameter p is b.now():
// the server's clock when p is NULL.
func nowSQL(p string) string { return `coalesce(` + p + `::timestamptz, clock_timestamp())` }

// graceMS is the parameter of leaseEnd: the lease, plus the skew that puts
// the server's start on the board's clock, in milliseconds.
func (b *Board) graceMS() int64 { return (b.opts.Lease + b.skew).Milliseconds() }

// ping makes the first connection, bounded by the connect timeout, and
// says what is wrong when it fails.
func (b *Board) ping(ctx context.Context, cc *pgx.ConnConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cc.ConnectTimeout+time.Second)
	defer cancel()
	err := b.pool.Ping(ctx)
	if err == nil {
		return nil
	}
	where := net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
	if strings.HasPrefix(cc.Host, "/") {
		where = "the unix socket in " + cc.Host
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return b.scrub(fmt.Errorf("open board %s: the server at %s refused role %q: %s; check the user and password in the URL (or PGPASSWORD / ~/.pgpass): %w",
				b.location, where, cc.User, pe.Message, ErrLogin))
		case pe.Code == "3D000":
			return b.scrub(fmt.Errorf("open board %s: %s; create it (createdb %s) or fix the URL", b.location, pe.Message, cc.Database))
		}
		return b.scrub(fmt.Errorf("open board %s: the server at %s said: %s (SQLSTATE %s)", b.location, where, pe.Message, pe.Code))
	}
	// The cause first, the board last: its location holds a '?' (before
	// its sslmode, say) that a reader would stop at.
	return b.scrub(connectErr(err, connTarget{where: where, host: cc.Host, sslmode: b.sslmode, within: cc.ConnectTimeout, board: b.location}))
}

// Created reports whether this Open created the board's tables: the
// database had no board before. Of several processes opening it at once,
// at most one sees true.
func (b *Board) Created() bool { return b.created }

// Location implements actions.Board: the URL without its password.
func (b *Board) Location() string { return b.location }

// closed returns the error every call returns from now on: the newer
// schema that stopped the Board (see refuseNewer), or actions.ErrClosed,
// naming the board, once Close has begun.
func (b *Board) closed() error {
	if err := b.broken.Load(); err != nil {
		return *err
	}
	if b.ctx.Err() != nil {
		return fmt.Errorf("board %s: %w", b.location, actions.ErrClosed)
	}
	return nil
}

// redactURL returns location without its password (in the user info or a
// password= parameter), and the password.
func redactURL(location string) (string, string) {
	u, err := url.Parse(location)
	if err != nil {
		// Cut whatever stands between "://" and "@" down to the user.
		scheme, rest, ok := strings.Cut(location, "://")
		if !ok {
			return "(a URL that does not parse)", ""
		}
		userinfo, host, ok := strings.Cut(rest, "@")
		if !ok {
			return location, ""
		}
		user, pw, _ := strings.Cut(userinfo, ":")
		return scheme + "://" + user + "@" + host, pw
	}
	var password string
	if u.User != nil {
		password, _ = u.User.Password()
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	if pw := q.Get("password"); pw != "" {
		password = pw
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), password
}

// scrubbed is an error whose text has the password taken out.
type scrubbed struct {
	err      error
	password string
}

func (s scrubbed) Error() string {
	text := s.err.Error()
	for _, pw := range []string{s.password, url.QueryEscape(s.password), url.PathEscape(s.password)} {
		text = strings.ReplaceAll(text, pw, "xxxxx")
	}
	return text
}

func (s scrubbed) Unwrap() error { return s.err }

// scrub takes password out of err's text, keeping err for errors.Is.
func scrub(err error, password string) error {
	if err == nil || len(password) < 3 {
		return err
	}
	return scrubbed{err: err, password: password}
}

func (b *Board) scrub(err error) error { return scrub(err, b.password) }

// hostKey names this machine for people (its host name) and, as key, the
// place where this process's pids mean something: the kernel's boot and
// the pid namespace. Two members with the same key can judge each other's
// pids; others only each other's leases.
func hostKey() (host, key string) {
	host, _ = os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	if len(boot) == 0 {
		return host, "host:" + host
	}
	return host, strings.TrimSpace(string(boot)) + "/" + ns
}

func newToken(n int) string {
	raw := make([]byte, n)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(raw)
}

// retryable reports whether err is a failure another attempt may not
// meet: the connection dropped, the server is restarting or refused a
// connection for now, or the transaction lost a serialization or deadlock
// race. The board's own refusals and context ends are not.
func retryable(err error) bool {
	if errors.Is(err, errMachineLate) {
		return true
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57P"), // admin or crash shutdown, cannot connect now
			strings.HasPrefix(pe.Code, "53"),  // insufficient resources (too many connections)
			pe.Code == "40001", pe.Code == "40P01":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) || isConnLost(err)
}

// isConnLost recognizes the remaining ways pgx reports a connection that
// went away under a statement.
func isConnLost(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "connection refused")
}

// fail says why an operation failed: the caller's ctx ended (its error,
// unwrapped, so callers can compare it), the Board closed, the bound
// within passed while the server was unreachable, or the database refused.
func (b *Board) fail(ctx context.Context, op string, err error, within time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case b.ctx.Err() != nil:
		return b.closed()
	case isSentinel(err):
		return err
	case retryable(err) || errors.Is(err, context.DeadlineExceeded):
		return b.scrub(&reachError{sentinel: ErrUnreachable, cause: err,
			msg: fmt.Sprintf("board %s: %s: the PostgreSQL server has not answered for %v%s; check that it runs and is reachable",
				b.location, op, within.Round(100*time.Millisecond), lostDetail(err))})
	}
	return b.scrub(fmt.Errorf("board %s: %s: %w", b.location, op, err))
}

// isSentinel reports whether err is one of the board's own refusals, which
// already say which action and why: the contract's, and the schema's.
func isSentinel(err error) bool {
	return engine.IsRefusal(err) || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrNotBoard)
}

// backoff sleeps before attempt n+1 (n from 0) of an operation: 20 ms
// doubling to 1 s. It returns false when ctx ends first.
func backoff(ctx context.Context, n int) bool {
	d := 20 * time.Millisecond << min(n, 6)
	d = min(d, time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// A txFunc is the body of a write transaction. It may run more than once
// (after a failed attempt), so it sets its results afresh each time.
type txFunc func(ctx context.Context, tx pgx.Tx) error

// write runs fn in one transaction, retrying what retryable accepts until
// Options.Retry passes or ctx ends. ctx's end stops the transaction only
// before its commit: a commit runs to its end (within commitBound, and
// within ctx's deadline when it has one), so a write whose caller went
// away is either undone or done (and a caller that must not hold what it
// did not receive, like Next, gives it back). A commit whose answer was
// lost is resolved by asking the server whether that transaction
// committed (by its id, taken at the start), so a committed write is
// never done again or reported as failed. When the answer to that does
// not come either (by ctx's deadline, or within Options.Retry for a ctx
// without one), write returns an *engine.Unsure, which asks again later:
// so write returns by ctx's deadline whatever the server does. Errors fn
// returns that do not come from the database pass through.
func (b *Board) write(ctx context.Context, op string, fn txFunc) error {
	return b.writeWithin(ctx, op, b.opts.Retry, fn)
}

func (b *Board) writeWithin(ctx context.Context, op string, limit time.Duration, fn txFunc) error {
	if err := b.closed(); err != nil {
		return err
	}
	start := time.Now()
	octx, cancel := b.life.Bound(ctx, limit)
	defer cancel()
	for n := 0; ; n++ {
		xid, err := b.attempt(octx, commitBy(ctx), fn)
		if err != nil && xid != 0 {
			// The commit's fate is unknown: ask.
			var known, committed bool
			known, committed, err = b.settle(ctx, op, xid, err, start)
			switch {
			case !known:
				return err // an *engine.Unsure
			case committed:
				return nil
			}
		}
		if err == nil {
			return nil
		}
		if isSentinel(err) {
			return err
		}
		// The first statement goes with the version check (see pipeTx):
		// pgx prepares it first, which fails on a schema a newer bee
		// changed before the check can answer.
		if err = b.schemaGone(octx, err); isSentinel(err) {
			return err
		}
		if !retryable(err) || !backoff(octx, n) {
			return b.fail(ctx, op, err, time.Since(start))
		}
		b.log.Debug("transaction failed; retrying", "op", op, logkey.Err, b.scrub(err))
	}
}

// commitBound bounds a commit, which runs whatever the caller's context
// does (but not past its deadline).
const commitBound = 5 * time.Second

// commitBy is when the commit of a write for ctx must have answered:
// within commitBound, and by ctx's deadline when it has one.
func commitBy(ctx context.Context) time.Time {
	by := time.Now().Add(commitBound)
	if d, ok := ctx.Deadline(); ok && d.Before(by) {
		return d
	}
	return by
}

// attempt runs fn in a transaction once, bounded by ctx, and commits it by
// by whatever ctx does. xid is non-zero only when the outcome is unknown:
// the commit was sent but its answer lost.
func (b *Board) attempt(ctx context.Context, by time.Time, fn txFunc) (xid int64, err error) {
	c, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	tx := newPipeTx(c, b.firstTrip())
	detached, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	defer func() {
		if err != nil && xid == 0 {
			_ = tx.Rollback(detached)
		}
		tx.release()
	}()
	if err := fn(ctx, tx); err != nil {
		return 0, err
	}
	if b.opts.beforeCommit != nil {
		b.opts.beforeCommit()
	}
	if err := tx.Commit(detached); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return 0, err // the server answered: it did not commit
		}
		return tx.xid, err
	}
	return 0, nil
}

// settle finds out whether transaction xid, whose commit's answer was lost
// (cause), committed: known is false when the server did not say by ctx's
// deadline (or within Options.Retry, for a ctx without one, or before the
// Board closed); err is then an *engine.Unsure that asks again. When known
// and not committed, err is cause.
func (b *Board) settle(ctx context.Context, op string, xid int64, cause error, start time.Time) (known, committed bool, err error) {
	limit := b.opts.Retry
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d)
	}
	actx, cancel := b.life.Bound(context.WithoutCancel(ctx), limit)
	defer cancel()
	committed, err = b.committed(actx, xid)
	switch {
	case err == nil && committed:
		b.log.Info("a commit whose answer was lost had committed", "xid", xid)
		return true, true, nil
	case err == nil:
		return true, false, cause
	}
	b.log.Warn("a commit's answer was lost and the server has not said whether it committed; asking again in the background",
		"op", op, "xid", xid, logkey.Err, b.scrub(err))
	return false, false, &engine.Unsure{
		Err: b.scrub(&reachError{sentinel: ErrUnreachable, cause: cause,
			msg: fmt.Sprintf("board %s: %s: the PostgreSQL server has not answered for %v, after the change was sent: it may have been made or not; look before doing it again, and check that the server runs and is reachable",
				b.location, op, time.Since(start).Round(100*time.Millisecond))}),
		Resolve: func(ctx context.Context) (bool, error) {
			ctx, cancel := b.life.Bound(ctx, forever)
			defer cancel()
			return b.committed(ctx, xid)
		},
	}
}

// forever is a bound that never comes first.
const forever = 100 * 365 * 24 * time.Hour

// askBound bounds one question of committed, so that a connection that
// died silently is left for another.
const askBound = 5 * time.Second

// committed asks, on another connection, whether transaction xid
// committed, asking again while the server is unreachable or has not
// finished it, until ctx ends (its error, then).
func (b *Board) committed(ctx context.Context, xid int64) (bool, error) {
	for n := 0; ; n++ {
		var status *string
		qctx, cancel := context.WithTimeout(ctx, askBound)
		err := b.pool.QueryRow(qctx, `SELECT pg_xact_status($1::text::xid8)`, fmt.Sprint(xid)).Scan(&status)
		cancel()
		if err == nil {
			switch {
			case status == nil:
				return false, fmt.Errorf("transaction %d is too old for the server to say whether it committed", xid)
			case *status == "committed":
				return true, nil
			case *status == "aborted":
				return false, nil
			}
			// "in progress": the server has not finished it yet.
		}
		if err != nil && ctx.Err() == nil && !retryable(err) && !errors.Is(err, context.DeadlineExceeded) {
			return false, err
		}
		if !backoff(ctx, n) {
			return false, ctx.Err()
		}
	}
}

// read runs fn, a read, retrying what retryable accepts until
// Options.Retry passes or ctx ends.
func (b *Board) read(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	if err := b.closed(); err != nil {
		return err
	}
	start := time.Now()
	octx, cancel := b.life.Bound(ctx, b.opts.Retry)
	defer cancel()
	for n := 0; ; n++ {
		err := fn(octx)
		if err == nil || errors.Is(err, pgx.ErrNoRows) || isSentinel(err) {
			return err
		}
		if err = b.schemaGone(octx, err); isSentinel(err) {
			return err
		}
		if !retryable(err) || !backoff(octx, n) {
			return b.fail(ctx, op, err, time.Since(start))
		}
	}
}
