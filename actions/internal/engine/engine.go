// Package engine is what every bee board does whatever its storage: the
// claim (Next), Notice, Changes and Await wait loops on an actions.Clock,
// the fan-out of wake-ups to local waiters (Hub), Open's defaults and the
// close lifetime (Life), the policy of reaping dead members and marking
// gone holders, the rules of posting, settling, cancelling and
// re-addressing, and the pages and errors every board returns. A board
// (actions/board on SQLite, actions/pgboard on PostgreSQL) embeds an
// Engine over its Store: its SQL, locking, wake-up transport, time columns
// and liveness check, behind small methods.
//
// The engine promises, on every store:
//
//   - Every change to actions happens inside one Store.Write, or, for a
//     claim on a store that is a Claimer, inside its one statement; the
//     wake-ups it makes are Events emitted inside that transaction and
//     fired to the local waiters (and Store.Tell) only once it has
//     committed.
//   - Every end of an action passes through changeTx, and every departure
//     (Depart, the reap of a dead process, a lease run out) through
//     departTx, inside the transaction that makes it: what must follow an
//     end or a departure is written there once.
//   - A claim whose caller has gone (its context ended as the claim
//     committed) is given back before the call returns.
//   - Errors name the action or cursor a caller gave, quoted within
//     actions.QuoteMax bytes.
//   - Reservations are decided here, in Go, over the store's rows (see
//     reserve.go): conflicts by pathglob.Overlap, the guard's Conflicts by
//     pathglob.Match after an index lookup, what holds an action with
//     paths back (hold.go), and their end with their holder (departTx),
//     their release, and the end of the action they serve (changeTx).
//
// It does not open, migrate or lock storage, carry wake-ups between
// processes, or judge whether a process lives: its Store does.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/logkey"
)

// Settings are the options every board takes, with the same meaning (see
// actions/board.Options).
type Settings struct {
	Logger     *slog.Logger
	Lease      time.Duration
	Renew      time.Duration
	SafetyPoll time.Duration
	PageSize   int
	Clock      actions.Clock
}

// Defaults are a store's values for the zero Settings.
type Defaults struct {
	Lease      time.Duration
	SafetyPoll time.Duration
	PageSize   int
}

// Filled returns s with each zero value set: d's, Lease/3 for Renew, a
// discarding logger and the wall clock. It refuses a Renew above half the
// Lease.
func (s Settings) Filled(d Defaults) (Settings, error) {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Lease <= 0 {
		s.Lease = d.Lease
	}
	if s.Renew <= 0 {
		s.Renew = s.Lease / 3
	}
	if s.Renew > s.Lease/2 {
		return Settings{}, fmt.Errorf("open board: renew interval %v must be at most half the lease %v", s.Renew, s.Lease)
	}
	if s.SafetyPoll <= 0 {
		s.SafetyPoll = d.SafetyPoll
	}
	if s.PageSize <= 0 {
		s.PageSize = d.PageSize
	}
	if s.Clock == nil {
		s.Clock = actions.WallClock()
	}
	return s, nil
}

// Config is what New needs besides the store: the filled Settings and the
// store's choices.
type Config struct {
	Settings // filled (see Settings.Filled)
	// Log is the board's logger (Settings.Logger with the board's
	// attributes).
	Log  *slog.Logger
	Life *Life
	Hub  *Hub
	// OnceBound bounds a Next that looks once (a non-positive timeout).
	OnceBound time.Duration
	// HotClaims lets an identity that claimed a moment ago claim again
	// without looking first (see call.hot): for a store whose writers
	// queue on one lock (the file's), where waiters look first to stay
	// off it but one draining a queue need not. PostgreSQL's claims skip
	// each other's rows instead, and always look first.
	HotClaims bool
	// Warm, when set, runs once, in the background and the board's
	// lifetime, the first time a Next or Notice of this board sleeps: the
	// store prepares then what a wake will need (the statements of a
	// claim and of an end), while the process waits, instead of on the
	// path from a post to its claim.
	Warm func()

	// Test hooks. AfterClaim runs right after a claim commits, before the
	// call looks at its context; BeforeSleep each time a Next, Notice or
	// Await, having found nothing, is about to sleep.
	AfterClaim  func(actions.Record)
	BeforeSleep func()
}

// An Engine is a board over its Store: it implements actions.Board but
// for Location, which the store's board adds. Its methods are safe for
// concurrent use.
type Engine struct {
	s   Store
	cfg Config
	log *slog.Logger

	mu  sync.Mutex          // guards hot
	hot map[identity.ID]hot // identities that claimed a moment ago

	procs liveness.Watch // judges the pids reap asks about; Close frees it

	warmOnce sync.Once // Config.Warm
}

// New returns the engine of s.
func New(cfg Config, s Store) *Engine {
	return &Engine{s: s, cfg: cfg, log: cfg.Log, hot: make(map[identity.ID]hot)}
}

// Name implements actions.Source.
func (e *Engine) Name() string { return "board" }

// Close stops the board's background work and frees its storage. It does
// not depart the joined members: a member that is not departed keeps its
// claims until its lease runs out, so a bridge calls Depart on a clean end
// and then Close. Calls in progress return actions.ErrClosed. Close may be
// called more than once; later calls return the first call's result.
func (e *Engine) Close() error {
	return e.cfg.Life.Close(func() error {
		defer e.procs.Close()
		return e.s.Shutdown()
	})
}

// done reports whether the board has closed.
func (e *Engine) done() bool { return e.cfg.Life.Context().Err() != nil }

// A txn is a store's transaction with the events it emitted, and the
// actions the ends in it opened or cancelled (see afterEnd), for the log.
type txn struct {
	Tx
	events            []Event
	opened, cancelled []string
}

// emit queues e, once per transaction, to wake its waiters after the
// commit (and, for a store whose transactions carry events, at it).
func (t *txn) emit(e Event) error {
	if slices.Contains(t.events, e) {
		return nil
	}
	t.events = append(t.events, e)
	return t.Notify(e)
}

// write runs fn in one write transaction of the store and, once it has
// committed, fires the events fn emitted.
func (e *Engine) write(ctx context.Context, op string, fn func(t *txn) error) error {
	var t *txn
	err := e.s.Write(ctx, op, func(tx Tx) error {
		t = &txn{Tx: tx}
		return fn(t)
	})
	if err != nil || t == nil {
		return err
	}
	if len(t.opened) > 0 {
		e.log.Info("actions opened: their prerequisites are done", logkey.ActionIDs, t.opened)
	}
	if len(t.cancelled) > 0 {
		e.log.Info("actions cancelled: a prerequisite failed or was cancelled", logkey.ActionIDs, t.cancelled)
	}
	for _, ev := range t.events {
		e.cfg.Hub.Fire(ev)
		e.s.Tell(ev)
	}
	return nil
}

// IsRefusal reports whether err is one of the contract's refusals, which
// already say which action and why: a store passes these through its
// retries and error wrapping unchanged.
func IsRefusal(err error) bool {
	for _, s := range []error{actions.ErrUnknownAction, actions.ErrNotHeld, actions.ErrEnded, actions.ErrNotPoster,
		actions.ErrNotOpen, actions.ErrNotLive, actions.ErrDeparted, actions.ErrClosed, actions.ErrEmptyTitle,
		actions.ErrEmptyReason, actions.ErrBadPoster, actions.ErrBadRecipient, actions.ErrTooLong, actions.ErrBadText,
		actions.ErrPrerequisiteEnded, actions.ErrBadPlan, actions.ErrUnknownPrerequisite, actions.ErrTooManyPrerequisites,
		actions.ErrBadPriority, actions.ErrNotForPerson, actions.ErrEmptyAnswer} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// wrap names op and the action id on err, unless err is a refusal, which
// names them already.
func wrap(op, id string, err error) error {
	if err == nil || IsRefusal(err) {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, label(id), err)
}

// unknown is actions.ErrUnknownAction for op ("" for none) on id.
func unknown(op, id string) error {
	if op == "" {
		return fmt.Errorf("action %s: %w", actions.Quote(id), actions.ErrUnknownAction)
	}
	return fmt.Errorf("%s action %s: %w", op, actions.Quote(id), actions.ErrUnknownAction)
}

// named names the action id for op on err when err is the store's bare
// actions.ErrUnknownAction (see Store): the one place a store's "no rows"
// becomes the contract's error for an action.
func named(op, id string, err error) error {
	if err == actions.ErrUnknownAction {
		return unknown(op, id)
	}
	return err
}
