package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Reservations, written once here over a store's rows (one per pattern):
// the conflict rule is Go's (pathglob.Overlap, pathglob.Match), and the
// store only finds the rows that could matter by their literal prefix (see
// Scope), an index lookup.

// A Held is one row of a store's reservations: one pattern of one
// reservation.
type Held struct {
	Res       int64 // the reservation's number: its id is "r-<Res>"
	Repo      string
	Holder    string
	Pattern   string // normalised (pathglob.Pattern.String)
	Exclusive bool
	Reason    string
	Action    int64 // the seq of the action it serves; 0 for none
	Since     time.Time
}

// A Scope says which reservation rows of a repository a read needs: those
// whose prefix (pathglob.Pattern.Prefix) is one of Exact, or starts with
// one of Under followed by '/', or every row of Repo when All is set (of
// every repository, when Repo is also ""). Rows come ordered by Res, then
// as they were written.
type Scope struct {
	Repo  string
	All   bool
	Exact []string
	Under []string
}

// A NewReservation is what ReserveTx.AddReservation writes: one row per
// pattern, all with one new reservation number.
type NewReservation struct {
	Repo, Holder string
	Patterns     []pathglob.Pattern
	Exclusive    bool
	Reason       string
	Action       int64 // 0 for none
}

// A Drop says which reservation rows ReserveTx.Drop deletes: those of
// Holder (when set), in Repo (when set), with one of Patterns (when any),
// serving one of Actions (when any). Holder or Actions is always set.
type Drop struct {
	Holder   string
	Repo     string
	Patterns []string
	Actions  []int64
}

// A PathAction is an open action that carries paths, as
// ReserveTx.PathActions returns it.
type PathAction struct {
	Seq    int64
	To     string
	Repo   string
	Paths  []string
	HeldBy string
}

// HeldByAll is the held_by of an open action nobody may claim: its paths
// overlap reservations of more than one holder, or of a person.
const HeldByAll = "*"

// ReserveTx is what a store's write transaction does for reservations.
type ReserveTx interface {
	// LockRepo serializes, until the transaction ends, the transactions
	// that decide on the reservations of repo (PostgreSQL: a transaction
	// advisory lock on the name's hash; the file board's writes are
	// serialized already). Every transaction takes the lock after the
	// action rows it locks, never before.
	LockRepo(repo string) error
	// Reserved returns the reservation rows s names.
	Reserved(s Scope) ([]Held, error)
	// AddReservation writes r, under a reservation number never given
	// before, and returns its number and time.
	AddReservation(r NewReservation) (res int64, since time.Time, err error)
	// Drop deletes the rows d names and returns them.
	Drop(d Drop) ([]Held, error)
	// PathActions returns the open actions that carry paths, in one of
	// repos or with one of seqs, in posting order.
	PathActions(repos []string, seqs []int64) ([]PathAction, error)
	// SetHeld writes held_by of the open action seq (and a new rev, since
	// views show it). A store may skip a row another transaction holds
	// locked: that one claims it (and recomputes it if the claim is given
	// back), ends it or re-addresses it (which recomputes it).
	SetHeld(seq int64, heldBy string) error
	// Life is who's member row, if any (ID "" when none), with whether it
	// is live by the store's rule.
	Life(who identity.ID) (MemberLife, error)
}

// ReserveReads are a store's reads of reservations, outside any write
// transaction.
type ReserveReads interface {
	// Reserved returns the reservation rows s names.
	Reserved(ctx context.Context, s Scope) ([]Held, error)
}

// ResID is the id of the reservation numbered res.
func ResID(res int64) string { return actions.ReservationPrefix + strconv.FormatInt(res, 10) }

// A reserveReq is a checked ReserveRequest.
type reserveReq struct {
	who       actions.Poster
	repo      string
	pats      []pathglob.Pattern
	exclusive bool
	reason    string
	action    int64
	actionID  string
}

// checkReserve checks what Reserve takes.
func checkReserve(who actions.Poster, r actions.ReserveRequest) (reserveReq, error) {
	q := reserveReq{who: who, repo: r.Repo, exclusive: !r.Shared, actionID: r.Action}
	if err := actions.CheckPoster(identity.ID(who)); err != nil {
		return q, err
	}
	if err := actions.CheckRepo(r.Repo); err != nil {
		return q, err
	}
	var err error
	if q.pats, err = pathglob.ParseAll(r.Patterns); err != nil {
		return q, err
	}
	if q.reason, err = actions.CheckReason(r.Reason); err != nil {
		return q, err
	}
	if r.Action != "" {
		seq, ok := position.ParseActionID(r.Action)
		if !ok {
			return q, unknown("", r.Action)
		}
		q.action = seq
	}
	return q, nil
}

// Reserve implements actions.Source: r is granted to who whole, in one
// write transaction, or refused whole with an *actions.ReservedError.
// Holders whose process died, or whose lease ran out, are departed first
// (their reservations with them), so they never stand in the way.
func (e *Engine) Reserve(ctx context.Context, who actions.Poster, r actions.ReserveRequest) (actions.Reservation, error) {
	q, err := checkReserve(who, r)
	if err != nil {
		return actions.Reservation{}, fmt.Errorf("reserve: %w", err)
	}
	e.reap(ctx)
	var res actions.Reservation
	for range 3 {
		var gone goneHolders
		err = e.write(ctx, "reserve", func(t *txn) error {
			var err error
			res, err = e.reserveTx(t, q)
			return err
		})
		if !errors.As(err, &gone) {
			break
		}
		e.dropGone(ctx, gone)
	}
	if err != nil {
		return actions.Reservation{}, fmt.Errorf("reserve: %w", err)
	}
	e.log.Info("paths reserved", logkey.Identity, string(who), keyReservation, res.ID, keyRepo, res.Repo, keyPatterns, res.Patterns)
	return res, nil
}

// goneHolders refuses a transaction that found holders in its way that
// are no longer live: the caller departs them, then tries again.
type goneHolders []string

func (g goneHolders) Error() string { return fmt.Sprintf("holders gone: %v", []string(g)) }

// reserveTx is Reserve's transaction: the action it serves (locked first:
// action rows before the repository's lock), the holder's life, the
// repository's lock, the conflicts, then the rows and the held-back
// actions of the repository.
func (e *Engine) reserveTx(t *txn, q reserveReq) (actions.Reservation, error) {
	if err := e.checkHolderTx(t, q); err != nil {
		return actions.Reservation{}, err
	}
	if err := t.LockRepo(q.repo); err != nil {
		return actions.Reservation{}, err
	}
	if err := e.conflictsTx(t, q.repo, string(q.who), q.pats, q.exclusive); err != nil {
		return actions.Reservation{}, err
	}
	n, since, err := t.AddReservation(NewReservation{Repo: q.repo, Holder: string(q.who), Patterns: q.pats,
		Exclusive: q.exclusive, Reason: q.reason, Action: q.action})
	if err != nil {
		return actions.Reservation{}, err
	}
	if err := e.holdTx(t, []string{q.repo}, nil); err != nil {
		return actions.Reservation{}, err
	}
	return actions.Reservation{ID: ResID(n), Repo: q.repo, Holder: string(q.who), Patterns: patternTexts(q.pats),
		Exclusive: q.exclusive, Reason: q.reason, Action: q.actionID, Since: since.UTC()}, nil
}

// checkHolderTx refuses an identity that is not live, and an action the
// holder does not hold.
func (e *Engine) checkHolderTx(t *txn, q reserveReq) error {
	if q.action != 0 {
		cur, err := t.Action(q.action)
		switch {
		case err != nil:
			return named("reserve for", q.actionID, err)
		case cur.State.Ended():
			return actions.EndedErr("reserve for", cur)
		case cur.State != actions.Claimed || cur.Holder != string(q.who):
			return notHeld("reserve for", identity.ID(q.who), cur)
		}
	}
	id, ok := q.who.Identity()
	if !ok {
		return nil // a person
	}
	life, err := t.Life(id)
	switch {
	case err != nil:
		return err
	case life.Departed:
		return fmt.Errorf("%s: %w; join it again or use a new identity", id, actions.ErrDeparted)
	case !life.Live:
		return actions.NotLiveErr(string(id), life.ID != "", false, nil)
	}
	return nil
}

// conflictsTx refuses patterns of holder in repo that conflict with other
// holders' reservations (an *actions.ReservedError), or says which of
// those holders are gone (goneHolders).
func (e *Engine) conflictsTx(t *txn, repo, holder string, pats []pathglob.Pattern, exclusive bool) error {
	rows, err := t.Reserved(scopeOf(repo, pats))
	if err != nil {
		return err
	}
	hits := overlapping(rows, holder, pats, exclusive)
	if len(hits) == 0 {
		return nil
	}
	var gone goneHolders
	for _, h := range holdersOf(hits) {
		id, ok := actions.Poster(h).Identity()
		if !ok {
			continue
		}
		life, err := t.Life(id)
		if err != nil {
			return err
		}
		if !life.Live {
			gone = append(gone, h)
		}
	}
	if len(gone) > 0 {
		return gone
	}
	return &actions.ReservedError{Repo: repo, Conflicts: group(hits), At: e.cfg.Clock.Now()}
}

// dropGone departs, each in the transaction that confirms it, the holders
// found no longer live (their process died, or their lease ran out): a
// reservation never outlives its holder. A failure is logged; the reap or
// the lease will.
func (e *Engine) dropGone(ctx context.Context, holders []string) {
	var dead []identity.ID
	err := e.write(ctx, "depart gone holders", func(t *txn) error {
		dead = nil
		for _, h := range holders {
			id, ok := actions.Poster(h).Identity()
			if !ok {
				continue
			}
			life, err := t.Life(id)
			if err != nil {
				return err
			}
			if life.ID == "" || life.Departed || life.Live {
				continue
			}
			if _, _, err := e.departTx(t, id); err != nil {
				return err
			}
			dead = append(dead, id)
		}
		return nil
	})
	if err != nil {
		e.log.Warn("cannot depart holders that are gone; the reap or their lease will", logkey.Err, err)
		return
	}
	if len(dead) > 0 {
		e.log.Info("members departed: gone while holding reservations", keyIdentities, dead)
	}
}

// ReleasePaths implements actions.Source: in one write transaction, who's
// rows that match (see actions.Source) are deleted, and the actions they
// held back are recomputed (and wake whoever may take them now).
func (e *Engine) ReleasePaths(ctx context.Context, who actions.Poster, repo string, patterns []string) ([]actions.Reservation, error) {
	if err := actions.CheckPoster(identity.ID(who)); err != nil {
		return nil, fmt.Errorf("release paths: %w", err)
	}
	if repo != "" {
		if err := actions.CheckRepo(repo); err != nil {
			return nil, fmt.Errorf("release paths: %w", err)
		}
	}
	pats, err := releasePatterns(patterns)
	if err != nil {
		return nil, fmt.Errorf("release paths: %w", err)
	}
	var dropped []Held
	err = e.write(ctx, "release paths", func(t *txn) error {
		var err error
		dropped, err = e.dropTx(t, Drop{Holder: string(who), Repo: repo, Patterns: pats}, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release paths: %w", err)
	}
	out := group(dropped)
	if len(out) > 0 {
		e.log.Info("paths released", logkey.Identity, string(who), keyRepo, repo, keyPatterns, pats)
	}
	return out, nil
}

// releasePatterns normalises what ReleasePaths takes: at most
// actions.MaxPatterns patterns, each one Parse accepts, each once.
func releasePatterns(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	ps, err := pathglob.ParseAll(patterns)
	if err != nil {
		return nil, err
	}
	return patternTexts(ps), nil
}

// dropTx deletes the rows d names, then recomputes the held-back actions
// of their repositories and the open actions seqs; it returns the rows.
func (e *Engine) dropTx(t *txn, d Drop, seqs []int64) ([]Held, error) {
	dropped, err := t.Drop(d)
	if err != nil {
		return nil, err
	}
	repos := reposOf(dropped)
	for _, r := range repos {
		if err := t.LockRepo(r); err != nil {
			return nil, err
		}
	}
	if len(repos) == 0 && len(seqs) == 0 {
		return dropped, nil
	}
	return dropped, e.holdTx(t, repos, seqs)
}

// Reservations implements actions.Source: the live reservations of repo
// ("" for every repository), oldest first. Members whose process died
// depart first (see reap), and so do holders whose lease ran out.
func (e *Engine) Reservations(ctx context.Context, repo string) ([]actions.Reservation, error) {
	if repo != "" {
		if err := actions.CheckRepo(repo); err != nil {
			return nil, fmt.Errorf("reservations: %w", err)
		}
	}
	e.reap(ctx)
	rows, err := e.s.Reserved(ctx, Scope{Repo: repo, All: true})
	if err != nil {
		return nil, fmt.Errorf("reservations: %w", err)
	}
	rows, err = e.liveRows(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("reservations: %w", err)
	}
	return group(rows), nil
}

// Conflicts implements actions.Source: an index lookup of the rows whose
// prefix is a segment-prefix of one of paths, then pathglob.Match.
// Holders found gone (see dropGone) are departed and left out.
func (e *Engine) Conflicts(ctx context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error) {
	if err := actions.CheckRepo(repo); err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	if len(paths) == 0 {
		return []actions.Reservation{}, nil
	}
	var prefixes []string
	for _, p := range paths {
		prefixes = append(prefixes, pathglob.SegmentPrefixes(p)...)
	}
	rows, err := e.s.Reserved(ctx, Scope{Repo: repo, Exact: dedupe(prefixes)})
	if err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	rows = matching(rows, string(who), paths)
	if len(rows) == 0 {
		return []actions.Reservation{}, nil
	}
	if rows, err = e.liveRows(ctx, rows); err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	return group(rows), nil
}

// liveRows keeps the rows whose holder is live (a person always is); it
// departs the holders that are not (see dropGone).
func (e *Engine) liveRows(ctx context.Context, rows []Held) ([]Held, error) {
	var ids []string
	for _, h := range holdersOf(rows) {
		if identity.IsID(h) {
			ids = append(ids, h)
		}
	}
	if len(ids) == 0 {
		return rows, nil
	}
	live, err := e.s.Alive(ctx, ids)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, id := range ids {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return rows, nil
	}
	e.dropGone(ctx, gone)
	out := rows[:0:0]
	for _, r := range rows {
		if !identity.IsID(r.Holder) || live[r.Holder] {
			out = append(out, r)
		}
	}
	return out, nil
}

// Log keys of reservations.
const (
	keyReservation = "reservation"
	keyRepo        = "repo"
	keyPatterns    = "patterns"
)
