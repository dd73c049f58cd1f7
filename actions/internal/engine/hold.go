package engine

import (
	"cmp"
	"context"
	"slices"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/actions/pathglob"
)

// Actions that carry paths, and what holds them back: an open action whose
// paths overlap another holder's reservation is held back (its held_by
// column): only that holder may claim it when it is one identity, nobody
// when there are several holders or a person (HeldByAll). held_by is
// recomputed here, in every transaction that changes a repository's
// reservations, and before an action with paths is posted; the claim
// statement of each store keeps only actions with held_by empty or the
// claimant.

// scopeOf is the scope of the rows that could overlap any of pats in repo
// (see pathglob.Pattern.Prefix).
func scopeOf(repo string, pats []pathglob.Pattern) Scope {
	s := Scope{Repo: repo}
	for _, p := range pats {
		pre := p.Prefix()
		if pre == "" {
			return Scope{Repo: repo, All: true}
		}
		s.Exact = append(s.Exact, pathglob.SegmentPrefixes(pre)...)
		s.Under = append(s.Under, pre)
	}
	s.Exact, s.Under = dedupe(s.Exact), dedupe(s.Under)
	return s
}

// overlapping returns the rows of holders other than holder that conflict
// with pats: their pattern overlaps one of pats, and it or the new one is
// exclusive.
func overlapping(rows []Held, holder string, pats []pathglob.Pattern, exclusive bool) []Held {
	var out []Held
	for _, r := range rows {
		if r.Holder == holder || !(exclusive || r.Exclusive) {
			continue
		}
		rp, err := pathglob.Parse(r.Pattern)
		if err != nil {
			continue // a row this bee cannot read holds nothing it knows
		}
		for _, p := range pats {
			if _, ok := pathglob.Overlap(rp, p); ok {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// matching returns the exclusive rows of holders other than who whose
// pattern matches one of paths.
func matching(rows []Held, who string, paths []string) []Held {
	var out []Held
	for _, r := range rows {
		if r.Holder == who || !r.Exclusive {
			continue
		}
		rp, err := pathglob.Parse(r.Pattern)
		if err != nil {
			continue
		}
		for _, p := range paths {
			if pathglob.Match(rp, p) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// group gathers rows into reservations, oldest first, each with its
// patterns in the order they were written; never nil.
func group(rows []Held) []actions.Reservation {
	out := []actions.Reservation{}
	at := map[int64]int{}
	for _, r := range rows {
		i, ok := at[r.Res]
		if !ok {
			i = len(out)
			at[r.Res] = i
			res := actions.Reservation{ID: ResID(r.Res), Repo: r.Repo, Holder: r.Holder, Exclusive: r.Exclusive,
				Reason: r.Reason, Since: r.Since.UTC()}
			if r.Action != 0 {
				res.Action = position.ActionID(r.Action)
			}
			out = append(out, res)
		}
		if !slices.Contains(out[i].Patterns, r.Pattern) {
			out[i].Patterns = append(out[i].Patterns, r.Pattern)
		}
	}
	slices.SortStableFunc(out, func(a, b actions.Reservation) int { return cmp.Compare(resNum(a.ID), resNum(b.ID)) })
	return out
}

func resNum(id string) int64 {
	var n int64
	for _, c := range id[len(actions.ReservationPrefix):] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// holdersOf is the holders of rows, each once, in order.
func holdersOf(rows []Held) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Holder) {
			out = append(out, r.Holder)
		}
	}
	return out
}

// reposOf is the repositories of rows, each once, sorted (the order in
// which a transaction takes their locks).
func reposOf(rows []Held) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Repo)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dedupe returns ss without repeats, in order.
func dedupe(ss []string) []string {
	var out []string
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func patternTexts(ps []pathglob.Pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// parsePatterns parses the patterns an action carries, skipping any this
// bee cannot read.
func parsePatterns(ss []string) []pathglob.Pattern {
	out := make([]pathglob.Pattern, 0, len(ss))
	for _, s := range ss {
		if p, err := pathglob.Parse(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// heldBy is the held_by of an open action with patterns pats, given the
// rows near them: empty when none overlaps, the one identity that holds
// every overlapping row, else HeldByAll. Every overlap counts, shared or
// not: a claim reserves an action's paths exclusive.
func heldBy(rows []Held, pats []pathglob.Pattern) string {
	holders := holdersOf(overlapping(rows, "", pats, true))
	switch {
	case len(holders) == 0:
		return ""
	case len(holders) == 1 && !actions.IsUser(holders[0]):
		return holders[0]
	}
	return HeldByAll
}

// holdTx recomputes, inside t, the held_by of the open actions with paths
// in repos or among seqs, and wakes those who may now take one that
// changed.
func (e *Engine) holdTx(t *txn, repos []string, seqs []int64) error {
	acts, err := t.PathActions(repos, seqs)
	if err != nil || len(acts) == 0 {
		return err
	}
	byRepo := map[string][]int{}
	for i, a := range acts {
		byRepo[a.Repo] = append(byRepo[a.Repo], i)
	}
	for repo, idx := range byRepo {
		var all []pathglob.Pattern
		for _, i := range idx {
			all = append(all, parsePatterns(acts[i].Paths)...)
		}
		rows, err := t.Reserved(scopeOf(repo, all))
		if err != nil {
			return err
		}
		for _, i := range idx {
			a := acts[i]
			h := heldBy(rows, parsePatterns(a.Paths))
			if h == a.HeldBy {
				continue
			}
			if err := t.SetHeld(a.Seq, h); err != nil {
				return err
			}
			if err := e.wakeOpen(t, a.To, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// wakeOpen wakes those who may take an open action for to, held back by
// heldBy: its recipients when nothing holds it, the one identity that
// holds it, or nobody.
func (e *Engine) wakeOpen(t *txn, to, heldBy string) error {
	switch heldBy {
	case "":
		return t.emit(Event{Claimable, wakeup.ForRecipient(to)})
	case HeldByAll:
		return nil
	}
	return t.emit(Event{Claimable, wakeup.ForRecipient(heldBy)})
}

// holdNewTx sets a.HeldBy before a is posted: what already holds its
// paths back.
func (e *Engine) holdNewTx(t *txn, a *NewAction) error {
	if len(a.Paths) == 0 {
		return nil
	}
	if err := t.LockRepo(a.Repo); err != nil {
		return err
	}
	pats := parsePatterns(a.Paths)
	rows, err := t.Reserved(scopeOf(a.Repo, pats))
	if err != nil {
		return err
	}
	a.HeldBy = heldBy(rows, pats)
	return nil
}

// claimPathsTx reserves, inside the claim's transaction, the paths of rec
// that who has just taken: exclusive, serving it, its title the reason. A
// claim that finds them reserved by another after all (a reservation
// committed as the claim looked) is given back: ok is false, and the
// action's held_by says why.
func (e *Engine) claimPathsTx(t *txn, rec actions.Record) (ok bool, _ error) {
	if len(rec.Paths) == 0 {
		return true, nil
	}
	if err := t.LockRepo(rec.Repo); err != nil {
		return false, err
	}
	pats := parsePatterns(rec.Paths)
	rows, err := t.Reserved(scopeOf(rec.Repo, pats))
	if err != nil {
		return false, err
	}
	if len(overlapping(rows, rec.Holder, pats, true)) > 0 {
		if _, _, err := t.Update(rec.Seq, rec.Holder, Update{State: actions.Open}); err != nil {
			return false, err
		}
		return false, e.holdTx(t, []string{rec.Repo}, nil)
	}
	reason, _ := actions.CheckReason(rec.Title)
	_, _, err = t.AddReservation(NewReservation{Repo: rec.Repo, Holder: rec.Holder, Patterns: pats, Exclusive: true,
		Reason: reason, Action: rec.Seq})
	if err != nil {
		return false, err
	}
	return true, e.holdTx(t, []string{rec.Repo}, nil)
}

// servedTx drops, inside t, the reservations serving the actions seqs,
// which have ended or gone back to open, and recomputes what they held
// back (and the actions themselves, when open again).
func (e *Engine) servedTx(t *txn, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	_, err := e.dropTx(t, Drop{Actions: seqs}, seqs)
	return err
}

// seqsOf is the seqs of the action ids ids.
func seqsOf(ids []string) []int64 {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if seq, ok := position.ParseActionID(id); ok {
			out = append(out, seq)
		}
	}
	return out
}

// markHeld fills HeldBackBy on the open records that carry paths: the
// reservations that overlap them, read in one lookup per repository.
func (e *Engine) markHeld(ctx context.Context, recs []actions.Record) {
	byRepo := map[string][]int{}
	for i, r := range recs {
		if r.State == actions.Open && len(r.Paths) > 0 {
			byRepo[r.Repo] = append(byRepo[r.Repo], i)
		}
	}
	for repo, idx := range byRepo {
		var all []pathglob.Pattern
		for _, i := range idx {
			all = append(all, parsePatterns(recs[i].Paths)...)
		}
		rows, err := e.s.Reserved(ctx, scopeOf(repo, all))
		if err != nil {
			continue
		}
		for _, i := range idx {
			recs[i].HeldBackBy = heldBack(rows, parsePatterns(recs[i].Paths))
		}
	}
}

// heldBack is what holds back an action with patterns pats: each row
// near it that overlaps one of them; nil for none.
func heldBack(rows []Held, pats []pathglob.Pattern) []actions.HeldBack {
	var out []actions.HeldBack
	for _, r := range overlapping(rows, "", pats, true) {
		out = append(out, actions.HeldBack{Reservation: ResID(r.Res), Holder: r.Holder, Pattern: r.Pattern})
	}
	return out
}

// readdressedTx recomputes, under its repository's lock, what holds back
// an action with paths that was just re-addressed: a recompute that ran
// while the re-address held the action's row may have skipped it (see
// ReserveTx.SetHeld).
func (e *Engine) readdressedTx(t *txn, rec actions.Record) error {
	if len(rec.Paths) == 0 {
		return nil
	}
	if err := t.LockRepo(rec.Repo); err != nil {
		return err
	}
	return e.holdTx(t, nil, []int64{rec.Seq})
}

// endServedTx drops, inside t, the reservations serving rec, which has
// just ended or gone back to open, and recomputes what they held back
// (and rec itself, when it is open again and carries paths).
func (e *Engine) endServedTx(t *txn, rec actions.Record) error {
	var again []int64
	if rec.State == actions.Open && len(rec.Paths) > 0 {
		again = []int64{rec.Seq}
	}
	_, err := e.dropTx(t, Drop{Actions: []int64{rec.Seq}}, again)
	return err
}
