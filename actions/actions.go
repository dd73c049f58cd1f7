// Package actions owns bee's action model: the Record an agent claims, the
// opaque Cursor and the Page that carries both, and the Source interface a
// bridge waits on. It has no storage of its own; implementations live in
// their own packages (actions/board) or here when they hold nothing
// (NoActions).
//
// Cursors are opaque: only a Source makes them, and a caller hands back the
// one it was given. A Source refuses a cursor it did not make with
// ErrBadCursor.
package actions

import (
	"context"
	"errors"
	"time"

	"github.com/tractat-us/bee/identity"
)

// A Cursor is an opaque position in a Source, made only by that Source. The
// empty Cursor means "from the start".
type Cursor string

// State is where an action is in its life.
type State string

// The states an action moves through: open -> claimed -> done, and claimed
// -> open again when its holder releases it, departs or loses its lease.
const (
	Open    State = "open"
	Claimed State = "claimed"
	Done    State = "done"
)

// A Record is one action as a Source reports it. ID is the handle the tools
// take back exactly as given.
type Record struct {
	ID    string `json:"id"`
	Seq   int64  `json:"seq"`
	To    string `json:"to"`   // "" for anyone, an agent name, or one identity
	From  string `json:"from"` // who posted it
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	State State  `json:"state"`
	// Holder is the identity holding the claim while State is Claimed, and
	// the one that finished it when State is Done.
	Holder    string     `json:"holder,omitempty"`
	Result    string     `json:"result,omitempty"`
	PostedAt  time.Time  `json:"postedAt"`
	ClaimedAt *time.Time `json:"claimedAt,omitempty"`
	DoneAt    *time.Time `json:"doneAt,omitempty"`
}

// A Page is a run of records and the cursor to resume from. Records is
// never nil, so it encodes as [] rather than null.
type Page struct {
	Records []Record `json:"records"`
	Cursor  Cursor   `json:"cursor"`
}

// A Member is an identity as it joins a Source: who it is and which
// processes it speaks for, so that people can see the live agents.
type Member struct {
	ID        identity.ID
	PID       int    // the bridge process
	ClaudePID int    // 0 when the bridge has no Claude ancestor
	SessionID string // the Claude Code session, when known
}

// Errors a Source returns, wrapped with the detail that names the action.
var (
	// ErrBadCursor: the cursor was not made by this Source.
	ErrBadCursor = errors.New("cursor not made by this source")
	// ErrUnknownAction: no action has that id.
	ErrUnknownAction = errors.New("unknown action")
	// ErrNotHeld: the action is not claimed by the caller (open, or held by
	// someone else).
	ErrNotHeld = errors.New("action not held by this identity")
	// ErrAlreadyDone: the action is finished; nothing more can be done to it.
	ErrAlreadyDone = errors.New("action already done")
	// ErrEmptyTitle: an action needs a title.
	ErrEmptyTitle = errors.New("action title is empty")
	// ErrReadOnly: the Source does not take posts, finishes or releases.
	ErrReadOnly = errors.New("source does not hold actions")
	// ErrDeparted: the identity has departed; Next will not claim for it.
	ErrDeparted = errors.New("identity has departed")
)

// A Source is where a bridge finds actions. Implementations are safe for
// concurrent use.
type Source interface {
	// Name says which source this is ("board", "none"), for people.
	Name() string

	// Join records that the member's identity is live. Idempotent.
	Join(ctx context.Context, m Member) error

	// Depart records that the identity has gone: its unfinished claims go
	// back to open at once, and nothing addressed to it is lost. Idempotent.
	Depart(ctx context.Context, who identity.ID) error

	// Next waits for the oldest open action who may take, claims it for who
	// and returns it with the cursor to resume from. It must return within
	// timeout: on timeout the page has no records and its cursor is where to
	// resume (it may have moved past actions others took). after marks a
	// position; it does not filter, so an action released or reclaimed
	// behind it is offered again. When ctx ends first it returns ctx's error
	// and leaves nothing claimed. It returns ErrBadCursor for a cursor it did
	// not make and ErrDeparted for an identity that has departed.
	Next(ctx context.Context, who identity.ID, after Cursor, timeout time.Duration) (Page, error)

	// List returns actions after since, oldest first, with the cursor to
	// page on from. It returns ErrBadCursor for a cursor it did not make.
	List(ctx context.Context, since Cursor) (Page, error)

	// Post adds an open action from who: an identity, or "user:<name>" for
	// a person. to is "" (anyone), an agent name or an identity. It returns
	// ErrEmptyTitle for an empty title.
	Post(ctx context.Context, who identity.ID, to, title, body string) (Record, error)

	// Finish marks an action who holds as done with an optional result. It
	// returns ErrUnknownAction, ErrNotHeld or ErrAlreadyDone, wrapped with
	// the action's id and, where there is one, its holder.
	Finish(ctx context.Context, who identity.ID, id, result string) (Record, error)

	// Release puts an action who holds back to open, with the same errors
	// as Finish.
	Release(ctx context.Context, who identity.ID, id string) (Record, error)

	// Close ends the source's background work (lease renewal, watchers).
	// Close may be called more than once.
	Close() error
}
