package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Plans: actions that wait for other actions. What a post with
// prerequisites, a plan, and the end of a prerequisite do is written here
// once, over the small primitives of PlanTx and PlanReads that each store
// supplies.
//
// Every edge goes from an older action to a newer one (a post names only
// actions that exist; a plan is inserted prerequisites first), so the
// actions a transaction locks for a plan's sake it locks in posting order,
// and a cycle can never form.

// PlanTx is what a store's write transaction does for plans. Locks are
// the PostgreSQL store's (READ COMMITTED); the file store's writes are
// serialized, so it locks nothing.
type PlanTx interface {
	// Prerequisites returns the actions among seqs that exist, in seq
	// order, locked against a concurrent end until the transaction ends
	// (FOR SHARE): a post that found one not yet done either commits
	// before that end looks for its waiters, or sees the end.
	Prerequisites(seqs []int64) ([]actions.Record, error)
	// Dependents returns the blocked actions that wait for seq directly,
	// in seq order, locked for update in that order: of two ends that
	// each meet a prerequisite of one action at once, the second waits
	// for the first to commit.
	Dependents(seq int64) ([]int64, error)
	// OpenReady opens those of seqs (locked by Dependents) that are still
	// blocked and whose prerequisites are all done, judged in a statement
	// after that lock, and returns them in seq order.
	OpenReady(seqs []int64) ([]actions.Record, error)
	// Waiting returns how blocked actions wait for seq, directly or
	// through other blocked actions: every edge whose Seq is such an
	// action and whose Pre is seq or another of them, by Seq and, for one
	// Seq, in the order its prerequisites were given. Those actions are
	// locked for update, in seq order, so that no post adds a waiter to
	// them before the transaction ends.
	Waiting(seq int64) ([]Edge, error)
	// CancelBlocked cancels each action of ends that is still blocked,
	// with its reason, ended by by, its poster told as ToldIfPerson says,
	// and returns them in seq order.
	CancelBlocked(ends []BlockedEnd, by string) ([]actions.Record, error)
}

// PlanReads are a store's reads for plans.
type PlanReads interface {
	// PlanOf returns the actions connected to seq through prerequisites,
	// both ways and transitively (seq's included), in seq order, and the
	// edges among them by Seq and the order given; actions.ErrUnknownAction
	// when no action is seq. (Not Plan: a store's type may carry the
	// Board's methods.)
	PlanOf(ctx context.Context, seq int64) ([]actions.Record, []Edge, error)
}

// An Edge says that the action Seq waits for the action Pre; Pre < Seq.
type Edge struct{ Seq, Pre int64 }

// A Prereq is what a NewAction waits for: the existing action Seq when
// Seq is above 0, else the entry Index of the same Insert (an earlier one).
type Prereq struct {
	Seq   int64
	Index int
}

// A BlockedEnd is a blocked action a cascade cancels, and why.
type BlockedEnd struct {
	Seq    int64
	Reason string
}

// checkDraft checks what a Draft adds to a post: its prerequisites
// (actions.CheckAfter) and priority (actions.CheckPriority).
func checkDraft(d actions.Draft) ([]Prereq, int, error) {
	after, err := actions.CheckAfter(d.After)
	if err != nil {
		return nil, 0, err
	}
	prio, err := actions.CheckPriority(d.Priority)
	if err != nil {
		return nil, 0, err
	}
	refs := make([]Prereq, 0, len(after))
	for _, id := range after {
		seq, _ := position.ParseActionID(id) // CheckAfter accepted it
		refs = append(refs, Prereq{Seq: seq})
	}
	return refs, prio, nil
}

// postTx inserts batch inside t, each action blocked while one of its
// prerequisites is not done and open otherwise (and held back while its
// paths overlap another's reservation), fills what the records wait for,
// and wakes those who may take the open ones: the one place actions are
// posted. It refuses the
// whole batch, with a *prereqRefusal naming each entry's unknown and
// ended prerequisites, before writing anything.
func (e *Engine) postTx(t *txn, batch []NewAction) ([]actions.Record, error) {
	pres, err := t.Prerequisites(existingPrereqs(batch))
	if err != nil {
		return nil, err
	}
	byseq := make(map[int64]actions.Record, len(pres))
	for _, r := range pres {
		byseq[r.Seq] = r
	}
	var refusal prereqRefusal
	for i := range batch {
		if err := judgePrereqs(&batch[i], byseq); err != nil {
			refusal.entries = append(refusal.entries, entryErr{i, err})
		}
	}
	if len(refusal.entries) > 0 {
		return nil, &refusal
	}
	for i := range batch {
		if batch[i].State != actions.Open {
			continue // what holds a blocked action back is decided as it opens (openedTx)
		}
		if err := e.holdNewTx(t, &batch[i]); err != nil {
			return nil, err
		}
	}
	recs, err := t.Insert(batch)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		fillPrereqs(&recs[i], batch[i].After, recs, byseq)
		if recs[i].State == actions.Open {
			if err := e.wakeOpen(t, recs[i].To, batch[i].HeldBy); err != nil {
				return nil, err
			}
		}
	}
	return recs, nil
}

// existingPrereqs returns the existing actions batch names, each once.
func existingPrereqs(batch []NewAction) []int64 {
	var seqs []int64
	for _, a := range batch {
		for _, p := range a.After {
			if p.Seq > 0 {
				seqs = append(seqs, p.Seq)
			}
		}
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// judgePrereqs sets a's state from its prerequisites (byseq holds those
// that exist), or says what is wrong with them: ids that name no action
// (actions.ErrUnknownAction), and prerequisites that failed or were
// cancelled (actions.ErrPrerequisiteEnded), each named.
func judgePrereqs(a *NewAction, byseq map[int64]actions.Record) error {
	a.State = actions.Open
	var unknown []string
	var ended []actions.Record
	for _, p := range a.After {
		r, ok := byseq[p.Seq]
		switch {
		case p.Seq <= 0:
			a.State = actions.Blocked // an entry of the same plan: not done yet
		case !ok:
			unknown = append(unknown, position.ActionID(p.Seq))
		case r.State == actions.Failed || r.State == actions.Cancelled:
			ended = append(ended, r)
		case r.State != actions.Done:
			a.State = actions.Blocked
		}
	}
	var errs []error
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("after %s: no such action (ids are as bee list shows them): %w",
			strings.Join(unknown, ", "), actions.ErrUnknownAction))
	}
	if len(ended) > 0 {
		errs = append(errs, endedPrereqsErr(ended))
	}
	return errors.Join(errs...)
}

// endedPrereqsErr names each prerequisite of ended and how it ended; it
// wraps actions.ErrPrerequisiteEnded.
func endedPrereqsErr(ended []actions.Record) error {
	parts := make([]string, 0, len(ended))
	for _, r := range ended {
		how := "failed"
		if r.State == actions.Cancelled {
			how = "was cancelled"
		}
		s := fmt.Sprintf("%s %s by %s", r.ID, how, r.EndedBy)
		if r.Reason != "" {
			s += " (" + cut(r.Reason, 120) + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Errorf("prerequisite %s, so this action could never open; post it without them, or after what replaces them: %w",
		strings.Join(parts, "; "), actions.ErrPrerequisiteEnded)
}

// fillPrereqs sets rec's After, as given, and BlockedBy while it is
// blocked: those not done (every entry of its own batch, and the existing
// ones byseq does not hold as done).
func fillPrereqs(rec *actions.Record, after []Prereq, batch []actions.Record, byseq map[int64]actions.Record) {
	for _, p := range after {
		id := position.ActionID(p.Seq)
		if p.Seq <= 0 {
			id = batch[p.Index].ID
		}
		rec.After = append(rec.After, id)
		if rec.State == actions.Blocked && (p.Seq <= 0 || byseq[p.Seq].State != actions.Done) {
			rec.BlockedBy = append(rec.BlockedBy, id)
		}
	}
}

// An entryErr is what is wrong with the prerequisites of entry i of a
// batch.
type entryErr struct {
	i   int
	err error
}

// A prereqRefusal refuses a batch for its entries' prerequisites.
type prereqRefusal struct{ entries []entryErr }

func (r *prereqRefusal) Error() string {
	msgs := make([]string, 0, len(r.entries))
	for _, e := range r.entries {
		msgs = append(msgs, e.err.Error())
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns each entry's error.
func (r *prereqRefusal) Unwrap() []error {
	errs := make([]error, 0, len(r.entries))
	for _, e := range r.entries {
		errs = append(errs, e.err)
	}
	return errs
}

// afterEnd is what follows rec's end in the same transaction (see
// changeTx): done opens the dependents it was the last prerequisite of;
// failed or cancelled cancels every action that waits for it.
func (e *Engine) afterEnd(t *txn, rec actions.Record) error {
	if rec.State == actions.Done {
		return e.openAfter(t, rec)
	}
	return e.cascade(t, rec)
}

// openAfter opens the blocked dependents of rec, done, whose other
// prerequisites are done too, and wakes those who may take them, as a post
// does.
func (e *Engine) openAfter(t *txn, rec actions.Record) error {
	deps, err := t.Dependents(rec.Seq)
	if err != nil || len(deps) == 0 {
		return err
	}
	opened, err := t.OpenReady(deps)
	if err != nil {
		return err
	}
	for _, r := range opened {
		if err := e.openedTx(t, r); err != nil {
			return err
		}
		t.opened = append(t.opened, r.ID)
	}
	return nil
}

// cascade cancels every action that waits for rec, failed or cancelled,
// directly or through others, each with a reason that names its own
// prerequisite and the outcome that started the cascade, ended by whoever
// ended rec, and tells their posters.
func (e *Engine) cascade(t *txn, rec actions.Record) error {
	edges, err := t.Waiting(rec.Seq)
	if err != nil || len(edges) == 0 {
		return err
	}
	root := fmt.Sprintf("prerequisite %s %s", rec.ID, outcome(rec))
	why := map[int64]string{rec.Seq: outcome(rec)}
	var ends []BlockedEnd
	for _, ed := range edges {
		if _, seen := why[ed.Seq]; seen {
			continue
		}
		how, ok := why[ed.Pre]
		if !ok {
			continue // cannot happen: every edge's Pre is rec or an earlier waiter
		}
		reason := cut(fmt.Sprintf("prerequisite %s %s", position.ActionID(ed.Pre), how), actions.MaxResultLen)
		// A waiter's own waiters hear of the root cause, not of every
		// link, so that a long chain's reasons stay short.
		why[ed.Seq] = "was cancelled: " + root
		ends = append(ends, BlockedEnd{Seq: ed.Seq, Reason: reason})
	}
	cancelled, err := t.CancelBlocked(ends, rec.EndedBy)
	if err != nil {
		return err
	}
	for _, r := range cancelled {
		if err := t.emit(EndedFor(r)); err != nil {
			return err
		}
		t.cancelled = append(t.cancelled, r.ID)
	}
	return nil
}

// outcome says how rec ended, for its waiters' reasons: "failed: why",
// "was cancelled" or "was cancelled: why".
func outcome(rec actions.Record) string {
	switch {
	case rec.State == actions.Failed:
		return "failed: " + rec.Reason
	case rec.Reason == "":
		return "was cancelled"
	}
	return "was cancelled: " + rec.Reason
}

// cut returns s cut to at most n bytes, at a character's boundary, marked
// with an ellipsis when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	i := n - len(more)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + more
}

// PostPlan implements actions.Source: every entry of plan from by in one
// write transaction, all or none, each blocked until its prerequisites
// (keys of the plan, ids of existing actions) are done. It refuses the
// plan, with an *actions.PlanError naming each problem and posting
// nothing, for what actions.CheckPlan refuses, a recipient that is not a
// live identity (actions.ErrNotLive), an id that names no action
// (actions.ErrUnknownAction) and a prerequisite that failed or was
// cancelled (actions.ErrPrerequisiteEnded). It returns the records in
// the plan's order with the key→id map, and wakes those who may take the
// open ones. Entries carry paths as a post's do.
func (e *Engine) PostPlan(ctx context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
	who := identity.ID(by)
	steps, err := actions.CheckPlan(who, plan)
	if err != nil {
		return actions.PostedPlan{}, fmt.Errorf("post plan: %w", err)
	}
	if err := e.checkPlanLive(ctx, steps); err != nil {
		return actions.PostedPlan{}, fmt.Errorf("post plan: %w", err)
	}
	batch := planBatch(who, plan, steps)
	var recs []actions.Record
	err = e.write(ctx, "post plan", func(t *txn) error {
		var err error
		recs, err = e.postTx(t, batch)
		return err
	})
	if r := (*prereqRefusal)(nil); errors.As(err, &r) {
		return actions.PostedPlan{}, fmt.Errorf("post plan: %w", planRefusal(r, steps))
	}
	if err != nil {
		return actions.PostedPlan{}, fmt.Errorf("post plan: %w", err)
	}
	out := actions.PostedPlan{Records: make([]actions.Record, len(plan)), IDs: make(map[string]string, len(plan))}
	for k, s := range steps {
		out.Records[s.Index] = recs[k]
		out.IDs[s.Key] = recs[k].ID
	}
	e.log.Info("plan posted", logkey.From, string(who), logkey.ActionIDs, actionIDs(recs))
	return out, nil
}

// planBatch turns a plan's checked steps into the actions to insert, in
// the steps' order, each after its prerequisites as the entry gave them.
func planBatch(who identity.ID, plan []actions.PlanEntry, steps []actions.PlanStep) []NewAction {
	at := make(map[string]int, len(steps)) // key -> its place in the batch
	batch := make([]NewAction, len(steps))
	for k, s := range steps {
		a := NewAction{To: s.To, From: string(who), Title: s.Title, Body: s.Body, Priority: s.Priority}
		if s.Paths != nil {
			a.Repo, a.Paths = s.Repo, patternTexts(s.Paths)
		}
		seen := make(map[string]bool, len(plan[s.Index].After))
		for _, item := range plan[s.Index].After {
			if seen[item] {
				continue
			}
			seen[item] = true
			// CheckPlan put every key named before the entry; a key is
			// never an action id.
			if j, ok := at[item]; ok {
				a.After = append(a.After, Prereq{Index: j})
			} else if seq, ok := position.ParseActionID(item); ok {
				a.After = append(a.After, Prereq{Seq: seq})
			}
		}
		batch[k] = a
		at[s.Key] = k
	}
	return batch
}

// planRefusal is r as a refusal of the plan, naming each entry's key.
func planRefusal(r *prereqRefusal, steps []actions.PlanStep) error {
	var probs []actions.PlanProblem
	for _, ee := range r.entries {
		s := steps[ee.i]
		probs = append(probs, actions.PlanProblem{Index: s.Index, Key: s.Key, Err: ee.err})
	}
	return planErr(probs)
}

// planErr refuses a plan for probs, in the order of the entries, keeping
// the first actions.MaxPlanProblems.
func planErr(probs []actions.PlanProblem) *actions.PlanError {
	slices.SortStableFunc(probs, func(a, b actions.PlanProblem) int { return a.Index - b.Index })
	pe := &actions.PlanError{Problems: probs}
	if len(probs) > actions.MaxPlanProblems {
		pe.Omitted = len(probs) - actions.MaxPlanProblems
		pe.Problems = probs[:actions.MaxPlanProblems]
	}
	return pe
}

// checkPlanLive refuses the plan when an entry is addressed to an identity
// that is not live, naming each such entry.
func (e *Engine) checkPlanLive(ctx context.Context, steps []actions.PlanStep) error {
	var probs []actions.PlanProblem
	judged := map[string]error{}
	for _, s := range steps {
		if !identity.IsID(s.To) {
			continue
		}
		err, ok := judged[s.To]
		if !ok {
			err = e.checkLive(ctx, s.To)
			if err != nil && !errors.Is(err, actions.ErrNotLive) {
				return err
			}
			judged[s.To] = err
		}
		if err != nil {
			probs = append(probs, actions.PlanProblem{Index: s.Index, Key: s.Key, Err: err})
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return planErr(probs)
}

func actionIDs(recs []actions.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// Plan implements actions.Board: every action connected to id through
// prerequisites, both ways and transitively, in posting order, and the
// edges among them. An action that waits for nothing and that nothing
// waits for is a plan of one. It returns actions.ErrUnknownAction for an
// unknown id. Members whose process died depart first.
func (e *Engine) Plan(ctx context.Context, id string) (actions.PlanGraph, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.PlanGraph{}, fmt.Errorf("plan: action %s: %w", actions.Quote(id), position.UnknownHint(id))
	}
	e.reap(ctx)
	recs, edges, err := e.s.PlanOf(ctx, seq)
	if err != nil {
		return actions.PlanGraph{}, fmt.Errorf("plan: %w", named("", id, err))
	}
	e.markGone(ctx, recs)
	in := make(map[int64]bool, len(recs))
	for _, r := range recs {
		in[r.Seq] = true
	}
	g := actions.PlanGraph{Records: recs, Edges: make([]actions.PlanEdge, 0, len(edges))}
	for _, ed := range edges {
		// A waiter posted between the store's reads is left for the next look.
		if in[ed.Seq] && in[ed.Pre] {
			g.Edges = append(g.Edges, actions.PlanEdge{Before: position.ActionID(ed.Pre), After: position.ActionID(ed.Seq)})
		}
	}
	return g, nil
}
