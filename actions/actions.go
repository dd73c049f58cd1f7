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
	"fmt"
	"time"

	"github.com/tractat-us/bee/identity"
)

// A Cursor is an opaque position in a Source, made only by that Source. The
// empty Cursor means "from the start".
type Cursor string

// State is where an action is in its life.
type State string

// The states an action moves through: open -> claimed -> done or failed,
// claimed -> open again when its holder releases it, departs or dies, and
// open or claimed -> cancelled by its poster or a person. An action posted
// after prerequisites not yet done starts blocked, and becomes open when
// the last of them is done, or cancelled when one fails or is cancelled.
// Done, failed and cancelled are terminal: an action that has ended never
// changes again.
const (
	Open      State = "open"
	Claimed   State = "claimed"
	Done      State = "done"      // finished by its holder, with an optional result
	Failed    State = "failed"    // its holder could not do it, and said why
	Cancelled State = "cancelled" // its poster or a person called it off
	// Blocked waits for prerequisites (Record.BlockedBy); it is never
	// claimed and never wakes anyone, and it is not terminal.
	Blocked State = "blocked"
)

// Ended reports whether s is terminal: done, failed or cancelled.
func (s State) Ended() bool { return s == Done || s == Failed || s == Cancelled }

// Known reports whether s is one of the six states.
func (s State) Known() bool { return s == Open || s == Claimed || s == Blocked || s.Ended() }

// A ListFilter narrows what Board.ListFiltered returns. The zero value
// keeps every action.
type ListFilter struct {
	// States keeps only the actions in one of these states; empty keeps
	// every state.
	States []State
}

// CheckStates returns an error naming the first state of f that is not one
// of the six.
func (f ListFilter) CheckStates() error {
	for _, s := range f.States {
		if !s.Known() {
			return fmt.Errorf("unknown state %s (open, blocked, claimed, done, failed or cancelled)", Quote(string(s)))
		}
	}
	return nil
}

// A Record is one action as a Source reports it. ID is the handle the tools
// take back exactly as given.
type Record struct {
	ID    string `json:"id"`
	Seq   int64  `json:"seq"`
	To    string `json:"to"`   // "" for anyone, an agent name, one identity, a person ("user:<name>") or "people"
	From  string `json:"from"` // who posted it
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	// Repo is the repository Paths are in (see package repo), "" when the
	// action carries no paths.
	Repo string `json:"repo,omitempty"`
	// Paths are the path patterns the action will change (package
	// pathglob): claiming it reserves them, exclusive, for the claimant
	// until the action ends or is released.
	Paths []string `json:"paths,omitempty"`
	State State    `json:"state"`
	// Holder is the identity holding the claim while State is Claimed, and
	// the one that held it last once the action has ended ("" when it was
	// cancelled before anyone claimed it).
	Holder string `json:"holder,omitempty"`
	// HeldBackBy says, while the action is open, which reservations of
	// other holders overlap its paths: while there are any, only their
	// holder (when there is one, and it is an identity) may claim it, and
	// it wakes nobody else.
	HeldBackBy []HeldBack `json:"heldBackBy,omitempty"`
	// HolderGone is set on a claimed action whose holder has gone without a
	// word (its process died): the claim goes back to open at the next
	// write, and every view shows it meanwhile.
	HolderGone bool   `json:"holderGone,omitempty"`
	Result     string `json:"result,omitempty"` // what a done action produced
	// Reason says why a failed or cancelled action ended.
	Reason string `json:"reason,omitempty"`
	// EndedBy is who ended it: the holder for done and failed, the poster
	// or a person for cancelled.
	EndedBy   string     `json:"endedBy,omitempty"`
	PostedAt  time.Time  `json:"postedAt"`
	ClaimedAt *time.Time `json:"claimedAt,omitempty"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Priority is MinPriority (most urgent) to MaxPriority; DefaultPriority
	// unless the post gave one. A claim takes the most urgent open action
	// first, the oldest first within a priority.
	Priority int `json:"priority"`
	// After lists the ids of the action's prerequisites, as they were
	// given (each once); nil for none.
	After []string `json:"after,omitempty"`
	// BlockedBy lists those of After not yet done, in After's order, while
	// the action is Blocked; nil otherwise.
	BlockedBy []string `json:"blockedBy,omitempty"`
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
	// Client is the agent CLI the bridge serves, as the process tree names
	// it ("claude", "codex", "gemini"; "" when unknown): people see which
	// seat is which in bee agents and on the page.
	Client string
}

// A MemberInfo is a live identity as a Board reports it to people.
type MemberInfo struct {
	ID    identity.ID `json:"identity"`
	Agent string      `json:"agent"`
	PID   int         `json:"pid"`
	// Host is the machine the bridge runs on, when the board is shared
	// across machines ("" on the embedded board): PID is that machine's.
	Host       string    `json:"host,omitempty"`
	ClaudePID  int       `json:"claudePid,omitempty"`
	SessionID  string    `json:"sessionId,omitempty"`
	Client     string    `json:"client,omitempty"` // see Member.Client
	JoinedAt   time.Time `json:"joinedAt"`
	RenewedAt  time.Time `json:"renewedAt"`
	LeaseUntil time.Time `json:"leaseUntil"`
	// Holding lists the ids of the actions the identity holds, oldest first;
	// never nil.
	Holding []string `json:"holding"`
	// WaiterSince is when the session's wake-on-work waiter was armed; nil
	// when none is armed (the session hears of new work only when it asks).
	WaiterSince *time.Time `json:"waiterSince,omitempty"`
}

// NoticeKind says what a Notice is about.
type NoticeKind string

// The kinds of Notice.
const (
	// NoticeWork: an action the identity may take, now claimed for it.
	NoticeWork NoticeKind = "work"
	// NoticeOutcome: an action the identity (or its agent) posted has
	// ended.
	NoticeOutcome NoticeKind = "outcome"
)

// A Notice is news for an idle session, as Source.Notice returns it.
type Notice struct {
	Kind   NoticeKind `json:"kind"`
	Record Record     `json:"record"`
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
	// ErrEnded: the action has ended (done, failed or cancelled); nothing
	// more can be done to it.
	ErrEnded = errors.New("action has ended")
	// ErrNotPoster: only the action's poster (an identity of the same
	// agent) or a person may cancel or re-address it.
	ErrNotPoster = errors.New("not the action's poster")
	// ErrNotOpen: the action is claimed; it can be re-addressed only while
	// it is open.
	ErrNotOpen = errors.New("action is not open")
	// ErrNotLive: the action is addressed to an identity that is not live
	// (departed, or its process is gone); nobody could ever claim it.
	ErrNotLive = errors.New("identity is not live")
	// ErrEmptyTitle: an action needs a title.
	ErrEmptyTitle = errors.New("action title is empty")
	// ErrEmptyReason: failing an action needs a reason.
	ErrEmptyReason = errors.New("reason is empty")
	// ErrReadOnly: the Source does not take posts, finishes or releases.
	ErrReadOnly = errors.New("source does not hold actions")
	// ErrDeparted: the identity has departed; Next will not claim for it.
	ErrDeparted = errors.New("identity has departed")
	// ErrPrerequisiteEnded: a post (or a plan) names a prerequisite that
	// has failed or been cancelled, so the action could never open; the
	// error names each such prerequisite and how it ended.
	ErrPrerequisiteEnded = errors.New("prerequisite failed or was cancelled")
)

// A Source is where a bridge finds actions. Implementations are safe for
// concurrent use.
type Source interface {
	// Name says which source this is ("board", "none"), for people.
	Name() string

	// Join records that the member's identity is live. Idempotent.
	Join(ctx context.Context, m Member) error

	// Depart records that the identity has gone: its unfinished claims go
	// back to open at once, and what was addressed to it exactly goes to
	// its agent name, so nothing addressed to it is lost. Idempotent.
	Depart(ctx context.Context, who identity.ID) error

	// Next waits for the most urgent open action who may take (the lowest
	// Priority, the oldest first within one), claims it for who and
	// returns it with the cursor to resume from. It must return within
	// timeout: on timeout the page has no records and its cursor is where to
	// resume (it may have moved past actions others took). after marks a
	// position; it does not filter, so an action released or reclaimed
	// behind it is offered again. When ctx ends first it returns ctx's error
	// and leaves nothing claimed. It returns ErrBadCursor for a cursor it did
	// not make and ErrDeparted for an identity that has departed.
	Next(ctx context.Context, who identity.ID, after Cursor, timeout time.Duration) (Page, error)

	// Notice waits, within timeout, for news for an idle who: an open
	// action who may take whose id is not in skip, which it claims for who
	// before returning (so that of several idle sessions only one hears of
	// it), or an ended action who posted (or a departed identity of who's
	// agent posted) that nobody has been told of yet, which it marks told.
	// Outcomes come first. ok is false on timeout. When ctx ends first it
	// returns ctx's error and leaves nothing claimed or told. It returns
	// ErrDeparted for an identity that has departed.
	Notice(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (n Notice, ok bool, err error)

	// Await waits, within timeout, until at least one of the actions ids
	// has ended, and returns the ended ones (an empty, non-nil slice on
	// timeout). Ended actions by posted (an agent's identity or a person)
	// are marked told: their poster has heard. It returns ErrUnknownAction, naming the id, before waiting
	// when an id names no action, and ctx's error when ctx ends first.
	Await(ctx context.Context, by Poster, ids []string, timeout time.Duration) ([]Record, error)

	// List returns actions after since, oldest first, with the cursor to
	// page on from. It returns ErrBadCursor for a cursor it did not make.
	List(ctx context.Context, since Cursor) (Page, error)

	// Get returns one action, or ErrUnknownAction.
	Get(ctx context.Context, id string) (Record, error)

	// Post adds the action d from by: an agent's identity or a person.
	// d.To is "" (anyone), an agent name or an identity. The action is
	// open, or blocked while a prerequisite in d.After is not yet done. It
	// returns ErrBadPoster when by is neither, ErrEmptyTitle for an empty
	// title, ErrNotLive, naming the live identities of that agent, for an
	// identity that is not live, what CheckAfter and CheckPriority refuse,
	// ErrUnknownAction naming each prerequisite that names no action and
	// ErrPrerequisiteEnded naming each that failed or was cancelled.
	Post(ctx context.Context, by Poster, d Draft) (Record, error)

	// PostPlan posts every entry of plan from by in one transaction, all
	// or none: CheckPlan's rules, and every action id in an entry's After
	// must exist (ErrUnknownAction) and must not have failed or been
	// cancelled (ErrPrerequisiteEnded), each named. It returns the records
	// in plan order (as given) with the key→id map.
	PostPlan(ctx context.Context, by Poster, plan []PlanEntry) (PostedPlan, error)

	// Finish marks an action who holds as done with an optional result. It
	// returns ErrUnknownAction, ErrNotHeld or ErrEnded, wrapped with the
	// action's id and, where there is one, who holds or ended it (and why,
	// for a cancelled action).
	Finish(ctx context.Context, who identity.ID, id, result string) (Record, error)

	// Fail marks an action who holds as failed, with the reason it could
	// not be done (ErrEmptyReason when there is none), with the same errors
	// as Finish.
	Fail(ctx context.Context, who identity.ID, id, reason string) (Record, error)

	// Release puts an action who holds back to open, with the same errors
	// as Finish.
	Release(ctx context.Context, who identity.ID, id string) (Record, error)

	// Cancel calls off an open or claimed action, with an optional reason.
	// by is a person, who may cancel any action, or an identity of the
	// agent that posted it (ErrNotPoster otherwise). It returns
	// ErrUnknownAction or ErrEnded like Finish.
	Cancel(ctx context.Context, by Poster, id, reason string) (Record, error)

	// Answer ends an open action addressed to people as done, with text
	// (non-empty: ErrEmptyAnswer) as its result: the answer its poster is
	// woken with. by must be a person (ErrBadPoster), and the action
	// addressed to by or to People (ErrNotForPerson otherwise, naming whom
	// it is for). It returns ErrUnknownAction, ErrEnded like Finish, and
	// ErrNotOpen for an action not open.
	Answer(ctx context.Context, by Poster, id, text string) (Record, error)

	// Decline ends an open action addressed to people as failed, with the
	// reason (ErrEmptyReason when there is none), with the same errors as
	// Answer.
	Decline(ctx context.Context, by Poster, id, reason string) (Record, error)

	// SetWaiter records whether who's session has a wake-on-work waiter
	// armed, for people to see (MemberInfo.WaiterSince).
	SetWaiter(ctx context.Context, who identity.ID, armed bool) error

	// Reserve grants r to who whole, or refuses it whole with
	// ErrReserved (a *ReservedError) naming each conflicting holder, its
	// patterns, reason, age and action. who is a live identity
	// (ErrNotLive, ErrDeparted otherwise) or a person. It refuses a
	// repository CheckRepo refuses, patterns pathglob.ParseAll refuses
	// (ErrBadPattern, naming each), a reason CheckReason refuses, and an
	// r.Action who does not hold (ErrUnknownAction, ErrNotHeld, ErrEnded).
	Reserve(ctx context.Context, who Poster, r ReserveRequest) (Reservation, error)

	// ReleasePaths drops who's patterns in repo (all of who's reservations
	// in repo when patterns is empty; every repo when repo is also empty)
	// and returns what it dropped: the reservations that lost patterns,
	// each with the patterns it lost. Patterns are compared normalised
	// (pathglob.Parse); one who does not hold is not an error. It refuses
	// patterns pathglob.Parse refuses (ErrBadPattern).
	ReleasePaths(ctx context.Context, who Poster, repo string, patterns []string) ([]Reservation, error)

	// Reservations lists the live reservations of repo ("" for every
	// repo), oldest first. A reservation whose holder has died is gone
	// (reaped first).
	Reservations(ctx context.Context, repo string) ([]Reservation, error)

	// Conflicts returns the live exclusive reservations held by anyone
	// other than who in repo that match any of paths (clean repo-relative
	// file paths, not patterns), oldest first, each with only those of
	// its patterns that match: the guard's question. It is an index
	// lookup, not a scan of the repository's reservations.
	Conflicts(ctx context.Context, who Poster, repo string, paths []string) ([]Reservation, error)

	// Close ends the source's background work (lease renewal, watchers).
	// Close may be called more than once.
	Close() error
}

// A PostedPlan is what PostPlan returns: the records in plan order, and
// the id each key became.
type PostedPlan struct {
	Records []Record          `json:"records"`
	IDs     map[string]string `json:"ids"` // key → action id
}

// A PlanGraph is an action's whole plan, as Board.Plan returns it: the
// actions in posting order and the prerequisite edges among them.
type PlanGraph struct {
	Records []Record   `json:"records"`
	Edges   []PlanEdge `json:"edges"`
}

// A PlanEdge says that After waits for Before.
type PlanEdge struct {
	Before string `json:"before"` // the prerequisite
	After  string `json:"after"`  // the action that waits for it
}

// A Board is a Source as people use it (bee, the board page): it also
// lists the live identities, re-addresses actions and reports changes as
// they happen.
type Board interface {
	Source

	// Location says where the board is, for people: a file's path or a
	// server's URL without its password.
	Location() string

	// Members returns the live identities, oldest first, with what each
	// holds.
	Members(ctx context.Context) ([]MemberInfo, error)

	// Readdress sends an open action to someone else (to is "", an agent
	// name or a live identity). by is a person, or an identity of the
	// poster's agent (ErrNotPoster otherwise). It returns
	// ErrUnknownAction, ErrEnded, ErrNotOpen or ErrNotLive.
	Readdress(ctx context.Context, by Poster, id, to string) (Record, error)

	// ListFiltered is List keeping only the actions f keeps, filtered by
	// the board (so a long history of ended actions costs the board a
	// scan, not a transfer of every record). Its cursors are List's, and a
	// page is never empty while a kept action remains after since. It
	// returns an error naming an unknown state in f.
	ListFiltered(ctx context.Context, since Cursor, f ListFilter) (Page, error)

	// Head returns the change cursor of the board as it is now: Changes
	// from it reports only what changes afterwards.
	Head(ctx context.Context) (Cursor, error)

	// Plan returns every action connected to id through prerequisites (its
	// whole plan, both directions, transitively), in posting order, and the
	// edges among them. An action with no prerequisites and no dependents
	// is a plan of one. It returns ErrUnknownAction for an unknown id.
	Plan(ctx context.Context, id string) (PlanGraph, error)

	// Changes returns the actions that changed after the change cursor
	// after (made by Head or Changes; "" is the start), each once, in its
	// current state, waiting up to timeout for a change in any process. On
	// timeout the page is empty and its cursor is after.
	Changes(ctx context.Context, after Cursor, timeout time.Duration) (Page, error)
}
