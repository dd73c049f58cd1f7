package engine

import (
	"context"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
)

// A Store is what a board keeps in its own storage, as the engine asks for
// it: its reads, its write transaction, the carriage of wake-ups to other
// processes, and what it keeps of this process's members. Every read that
// names one action by seq returns actions.ErrUnknownAction, unwrapped, when
// there is no such action: the store maps its own "no rows" there in one
// place, and the engine names the action.
//
// Reads and writes honour ctx and the board's lifetime; their errors say
// what a person can do (the store's own sentinels: locked, unreachable,
// damaged). A store is safe for concurrent use.
type Store interface {
	// Closed returns the error every call returns from now on (the board
	// closed, or stopped for good), or nil.
	Closed() error
	// Cursors makes and reads the board's cursors.
	Cursors() position.Cursors

	// Write runs fn in one write transaction and commits it. fn may run
	// more than once (a store that retries a transaction lost to a dropped
	// connection runs it again), so it sets its results afresh each time.
	// Errors fn returns that do not come from the storage pass through
	// unchanged; a committed write is never reported as failed.
	//
	// Write returns by ctx's deadline, if it has one, whatever the storage
	// does: when the commit was sent but its answer has not come by then,
	// it returns an *Unsure, which finds out later whether it committed.
	Write(ctx context.Context, op string, fn func(Tx) error) error
	// Tell carries e to the board's other processes once the transaction
	// that made it has committed. A store whose transactions carry their
	// events themselves (Tx.Notify) does here only what it leaves out of
	// its commits (PostgreSQL: a claim's, on the change channel,
	// coalesced).
	Tell(e Event)

	Reads
	Local
}

// Reads are a store's reads, outside any write transaction.
type Reads interface {
	ReserveReads
	// Action is the action seq.
	Action(ctx context.Context, seq int64) (actions.Record, error)
	// List is the actions after seq after, in posting order, in one of
	// states (every state when empty), at most limit of them and about
	// pages.MaxBytes of text.
	List(ctx context.Context, after int64, states []actions.State, limit int) ([]pages.Row, error)
	// Head is the change number (rev) of the board as it is now: every
	// change after it is reported by ChangesAfter(Head, MaxSeq).
	Head(ctx context.Context) (int64, error)
	// ChangesAfter is the actions whose (rev, seq) is after (rev, seq), in
	// that order, with their revs, at most limit of them; nap, when above
	// 0, is how soon to look again when there are none (a change the
	// store knows of but cannot report yet).
	ChangesAfter(ctx context.Context, rev, seq int64, limit int) (rows []pages.Row, nap time.Duration, err error)
	// Known returns the seqs among seqs that name an action.
	Known(ctx context.Context, seqs []int64) ([]int64, error)
	// EndedAmong returns the ended actions among seqs, in posting order.
	EndedAmong(ctx context.Context, seqs []int64) ([]actions.Record, error)
	// Look says, without writing, whether a claim for w could succeed now
	// and when a lease next runs out.
	Look(ctx context.Context, w Want) (Look, error)
	// Untold is the seq of an ended action whose outcome who should hear
	// and nobody has been told of (posted by who, or by a departed identity
	// of who's agent), or actions.ErrUnknownAction when there is none.
	Untold(ctx context.Context, who identity.ID) (int64, error)
	// Processes returns the members, not departed, whose process runs on
	// this machine (so that its death can be seen), with their pids.
	Processes(ctx context.Context) ([]Process, error)
	// Alive returns, for each of the identities ids that has a member row,
	// whether it is live by the store's rule (its process, or its lease).
	Alive(ctx context.Context, ids []string) (map[string]bool, error)
	// AgentMembers returns the member rows of agent, oldest first, with
	// whether each is live.
	AgentMembers(ctx context.Context, agent string) ([]MemberLife, error)
	// Members returns the live identities, oldest first, with what each
	// holds (see actions.Board).
	Members(ctx context.Context) ([]actions.MemberInfo, error)

	PlanReads
}

// Local is what a store keeps of this process's own members and
// resources, told by the engine after each commit.
type Local interface {
	// Joined: m joined through this board (by Join, or by its first
	// claim).
	Joined(m actions.Member)
	// Departing: who departs through this board; it is called before the
	// departure is written.
	Departing(who identity.ID)
	// Holding: who claimed (n = 1) or settled (n = -1) an action through
	// this board.
	Holding(who identity.ID, n int)
	// Shutdown ends the store's background work and frees what it holds,
	// once the board's lifetime has ended (see Life.Close).
	Shutdown() error
}

// A Tx is a store's write transaction, as Store.Write hands it to the
// engine. Its methods may be called only inside that call. Each reads or
// writes the rows it names, locked as the store needs.
type Tx interface {
	ReserveTx
	// Notify queues e in the transaction, for a store whose transactions
	// carry wake-ups to other processes (PostgreSQL's NOTIFY); it is sent
	// at the commit and never on a rollback. Other stores do nothing, and
	// a store may leave an event out of its commit for Tell to carry.
	Notify(e Event) error
	// Insert adds the actions of batch, in order (so that each has a
	// higher seq than the ones before it), with their prerequisites, and
	// returns them in that order. The records' After and BlockedBy are
	// the engine's to fill.
	Insert(batch []NewAction) ([]actions.Record, error)
	// Action is the action seq, locked for update.
	Action(seq int64) (actions.Record, error)
	// Update writes u to the action seq, and returns it. With holder set,
	// it changes the action only while holder holds its claim: ok is false
	// (and nothing changed) otherwise.
	Update(seq int64, holder string, u Update) (_ actions.Record, ok bool, _ error)
	// Readdress sends the action seq to to.
	Readdress(seq int64, to string) (actions.Record, error)
	// Claimant reads (and locks, as the store needs) w.Who's member row
	// before a claim, given the caller's latest look l: it joins who when
	// it has no row, refreshes a lease that runs low, and says what the
	// claim should do.
	Claimant(w Want, l Look) (Claimant, error)
	// Take claims for w.Who the first open action w may take (see Want),
	// unless w.Who has departed; ok is false when there is none.
	Take(w Want) (_ actions.Record, ok bool, _ error)
	// Expired returns the holders of claims, other than who, whose lease
	// has run out; ok is false when another claimer is reclaiming at the
	// same time (and this one must not).
	Expired(who identity.ID) (_ []identity.ID, ok bool, _ error)
	// ReleaseOrphans puts back to open every claim, other than who's,
	// whose holder is not a live member, and returns their ids.
	ReleaseOrphans(who identity.ID) ([]string, error)
	// Depart marks who departed (making a departed row for an identity
	// that never joined), puts its claims back to open and sends the open
	// actions addressed to it exactly to its agent name; it returns the
	// ids of both.
	Depart(who identity.ID) (released, readdressed []string, err error)
	// StillDead reports, under the row's lock, whether who is still a
	// member, not departed, of this machine whose process has died.
	StillDead(who identity.ID) (bool, error)
	// Join makes m live (again) with a fresh lease, after forgetting the
	// members whose lease ran out more than ForgetAfter ago and who hold
	// nothing.
	Join(m actions.Member) error
	// SetWaiter records whether who's wake-on-work waiter is armed.
	SetWaiter(who identity.ID, armed bool) error
	// MarkTold records that the outcomes of seqs have been heard.
	MarkTold(seqs []int64) error
	// Untell records that the outcomes of seqs have not been heard after
	// all (their telling's answer never reached anyone).
	Untell(seqs []int64) error
	// TellOutcome marks told, and returns, the outcome Untold finds for
	// who; ok is false when there is none any more.
	TellOutcome(who identity.ID) (_ actions.Record, ok bool, _ error)

	PlanTx
}

// An Unsure is the error of a Write whose commit was sent but whose answer
// did not come by its context's deadline (a server that fell silent): the
// write may have committed, or not. Err says so for a person (and wraps
// the store's sentinel). Resolve finds out, asking the storage again until
// it answers or ctx ends; until it does, the write's effects may appear at
// any time.
type Unsure struct {
	Err     error
	Resolve func(ctx context.Context) (committed bool, err error)
}

func (u *Unsure) Error() string { return u.Err.Error() }
func (u *Unsure) Unwrap() error { return u.Err }

// ForgetAfter is how long a member row outlives its lease before a Join
// deletes it. Until then a departed identity stays refused by Next.
const ForgetAfter = 7 * 24 * time.Hour

// A Want says which open actions a claim for Who may take: those addressed
// to anyone, to Who's agent name or to Who, not in Skip, the most urgent
// (lowest priority) first and, within a priority, the oldest first.
// Each store builds its claim statements (Look's and Take's) from it in
// one place, so that a rule of which and in what order is added once per
// store.
type Want struct {
	Who  identity.ID
	Skip []int64 // seqs not to take; never nil
}

// Recipients are the to_whom values w.Who may take: anyone, its agent,
// itself.
func (w Want) Recipients() []string { return []string{"", w.Who.Agent(), string(w.Who)} }

// A Look is what one read before a claim learns. Times are the store's
// (the time its lease columns hold): Now is the store's time when it
// looked, At Config.Clock's.
type Look struct {
	Claimable bool  // an open action w may take exists
	Reclaim   bool  // a claim must go back first: its holder's lease ran out, or it has none
	Departed  bool  // w.Who has departed
	Member    bool  // w.Who has a live member row (a store that uses Lease says so)
	Head      int64 // the highest seq posted
	// Expiry is the earliest end of another holder's lease; zero when
	// none is known.
	Expiry  time.Time
	Lease   time.Time // w.Who's own lease end, when Member
	Now, At time.Time
}

// A Claimant is what Tx.Claimant learns of the claimant before it claims.
type Claimant struct {
	Departed bool // the claim must not go on: ErrDeparted
	Joined   bool // the store made who a member for this claim
	// Idle: nothing is claimable and no lease has run out (the store
	// looked again); the claim ends without writing.
	Idle    bool
	Reclaim bool      // claims go back before the claim (see Engine.reclaimTx)
	Lease   time.Time // who's lease end, as far as the store knows
	// Expiry is when to look again should the claim find nothing: the
	// earliest lease end among others' claims, on the look's time; zero
	// when none.
	Expiry time.Time
}

// A NewAction is an action as Tx.Insert writes it: State is Open or
// Blocked (postTx decides), After what it waits for, in the order given.
type NewAction struct {
	To, From, Title, Body string
	State                 actions.State
	Priority              int
	After                 []Prereq
	// Repo and Paths are the repository and the normalised patterns of an
	// action that carries paths (none: "" and nil); HeldBy is its held_by
	// (see HeldByAll).
	Repo, HeldBy string
	Paths        []string
}

// An Update is what Tx.Update writes to an action: State Open puts a claim
// back (no holder, no claim time); Done, Failed and Cancelled end it, with
// Text as its result (Done) or reason, By as who ended it, and Told saying
// whether its poster has heard. Holder, when set, becomes the action's
// holder as it ends: the person who answers an open action addressed to
// people (a done or failed action has a holder).
type Update struct {
	State  actions.State
	Text   string
	By     string
	Told   Told
	Holder string
}

// Told says when the poster of an action that ends has heard of it.
type Told int

// The kinds of Told.
const (
	// ToldIfPerson: at once when a person posted it (people are not woken;
	// they ask), else when its poster's agent hears.
	ToldIfPerson Told = iota
	// ToldNow: at once (the poster ended it itself, say).
	ToldNow
	// NotTold: when its poster's agent hears.
	NotTold
)

// Tables says which of its tables a store that keeps ended actions apart
// from the live ones reads, for a List (see TablesOf).
type Tables int

// The kinds of Tables.
const (
	BothTables Tables = iota
	LiveTable         // open, blocked and claimed actions
	EndedTable        // done, failed and cancelled actions
)

// TablesOf says which of a store's tables holds every action in one of
// states: LiveTable when none of them has ended, EndedTable when all
// have, BothTables otherwise (and when states is empty: every state).
func TablesOf(states []actions.State) Tables {
	var live, ended bool
	for _, st := range states {
		if st.Ended() {
			ended = true
		} else {
			live = true
		}
	}
	switch {
	case live && !ended:
		return LiveTable
	case ended && !live:
		return EndedTable
	}
	return BothTables
}

// A Process is a member as Processes returns it.
type Process struct {
	ID  identity.ID
	PID int
}

// A MemberLife is a member row as AgentMembers returns it.
type MemberLife struct {
	ID       string
	Departed bool
	Live     bool
}

// A Claimer is a store that can claim in one statement committed on its
// own (PostgreSQL's), outside Write: Next and Notice then look and claim
// in one round trip, and a claim's commit carries nothing but the claim
// (no wake-up: the engine tells the claim after it, see Store.Tell). The
// store does only the common claim there; everything that needs the
// engine's policy inside the transaction it leaves to the engine's own
// claim transaction (see Claimed.Slow), so that the policy stays here.
//
// Claim, for w, in one statement: reads w.Who's member row (departed:
// nothing more), joins w.Who when it has none, and, unless a claim must
// go back first (a lease ran out, or a claim has a holder that is not a
// live member: Claimed.Reclaim) or the first action w may take carries
// paths, claims that action for w.Who. It writes nothing when it claims
// nothing (and joins no one): an empty claim commits no transaction.
//
// A claim whose answer did not come (by ctx's deadline, or Options'
// retry bound) returns a *ClaimUnsure, which finds out later whether it
// claimed.
type Claimer interface {
	Claim(ctx context.Context, w Want) (Claimed, error)
}

// Claimed is what one Claimer.Claim did and saw.
type Claimed struct {
	// Look is what the statement saw, on its own snapshot (Claimable: an
	// action w may take was there; Reclaim; Departed; Head; Expiry; Now,
	// At).
	Look
	Rec    actions.Record
	OK     bool // Rec was claimed for w.Who, and committed
	Joined bool // the statement made w.Who a member
	// Slow: it claimed nothing, but the engine's claim transaction may:
	// a claim must go back first (Look.Reclaim), or the first action w
	// may take carries paths, which the claim reserves (claimPathsTx).
	Slow bool
}

// A ClaimUnsure is the error of a Claim whose answer was lost: it may
// have claimed, or not. Resolve finds out, once the statement can no
// longer commit, asking until the storage answers or ctx ends; it returns
// what the claim did (OK with the record it claimed, Joined).
type ClaimUnsure struct {
	Err     error
	Resolve func(ctx context.Context) (Claimed, error)
}

func (u *ClaimUnsure) Error() string { return u.Err.Error() }
func (u *ClaimUnsure) Unwrap() error { return u.Err }
