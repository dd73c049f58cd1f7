package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// label is how an error names the action id: as it is when it is one a
// board makes, else quoted within actions.QuoteMax bytes.
func label(id string) string {
	if _, ok := position.ParseActionID(id); ok {
		return id
	}
	return actions.Quote(id)
}

// Post implements actions.Source: an action from by, an identity or a
// person ("user:<name>"), for d.To ("" for anyone, an agent name or a
// live identity), at priority d.Priority (actions.DefaultPriority when
// nil). It is blocked while one of d.After is not done, and open
// otherwise. It refuses what actions.CheckPost, actions.CheckAfter and
// actions.CheckPriority refuse, an identity that is not live
// (actions.ErrNotLive, naming the live identities of its agent), and
// prerequisites that name no action (actions.ErrUnknownAction) or failed
// or were cancelled (actions.ErrPrerequisiteEnded), naming each, and
// paths actions.CheckPaths refuses. An action with paths (d.Repo,
// d.Paths) is held back while they overlap another's reservation (see
// hold.go). Posting an open action wakes the waiters that may take it, in
// every process.
func (e *Engine) Post(ctx context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
	who := identity.ID(by)
	title, err := actions.CheckPost(who, d.To, d.Title, d.Body)
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	after, prio, err := checkDraft(d)
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	if err := e.checkLive(ctx, d.To); err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	pats, err := actions.CheckPaths(d.Repo, d.Paths)
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	a := NewAction{To: d.To, From: string(who), Title: title, Body: d.Body, Priority: prio, After: after}
	if pats != nil {
		a.Repo, a.Paths = d.Repo, patternTexts(pats)
	}
	var rec actions.Record
	err = e.write(ctx, "post", func(t *txn) error {
		recs, err := e.postTx(t, []NewAction{a})
		if err == nil {
			rec = recs[0]
		}
		return err
	})
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	e.log.Info("action posted", logkey.ActionID, rec.ID, logkey.From, rec.From, logkey.To, rec.To, logkey.State, rec.State)
	return rec, nil
}

// Get implements actions.Source: the action with the given id, or
// actions.ErrUnknownAction. Members whose process died depart first.
func (e *Engine) Get(ctx context.Context, id string) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("action %s: %w", actions.Quote(id), position.UnknownHint(id))
	}
	e.reap(ctx)
	rec, err := e.s.Action(ctx, seq)
	if err != nil {
		return actions.Record{}, named("", id, err)
	}
	recs := []actions.Record{rec}
	e.markGone(ctx, recs)
	return recs[0], nil
}

// List implements actions.Source: the actions posted after since, oldest
// first, in every state, at most Settings.PageSize of them (and about 1
// MiB of text), with the cursor to page on from. An empty page's cursor is
// since itself (or the start, for an empty since). Members whose process
// died depart first, and a claim whose holder is gone anyway is marked
// HolderGone.
func (e *Engine) List(ctx context.Context, since actions.Cursor) (actions.Page, error) {
	return e.list(ctx, since, nil)
}

// ListFiltered implements actions.Board: List keeping only the actions in
// one of f.States (all, when it is empty), filtered by the store.
func (e *Engine) ListFiltered(ctx context.Context, since actions.Cursor, f actions.ListFilter) (actions.Page, error) {
	if err := f.CheckStates(); err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	return e.list(ctx, since, f.States)
}

func (e *Engine) list(ctx context.Context, since actions.Cursor, states []actions.State) (actions.Page, error) {
	cur := e.s.Cursors()
	after, err := cur.ParseSeq(since)
	if err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	e.reap(ctx)
	rows, err := e.s.List(ctx, after, states, e.cfg.PageSize)
	if err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	page := pages.Page(rows, cur.Seq(after), func(r pages.Row) actions.Cursor { return cur.Seq(r.Seq) })
	e.markGone(ctx, page.Records)
	return page, nil
}

// Finish implements actions.Source: the action who holds becomes done,
// with result (at most actions.MaxResultLen bytes) kept on it, and its
// poster's waiters wake. It returns actions.ErrUnknownAction,
// actions.ErrNotHeld (the action is open, or held by someone else, whom
// the error names) or actions.ErrEnded (naming who ended it, and why when
// it was failed or cancelled).
func (e *Engine) Finish(ctx context.Context, who identity.ID, id, result string) (actions.Record, error) {
	if err := actions.CheckText("result", result, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("finish %s: %w", label(id), err)
	}
	return e.end(ctx, "finish", who, id, Update{State: actions.Done, Text: result})
}

// Fail implements actions.Source: the action who holds becomes failed,
// with reason (non-empty, at most actions.MaxResultLen bytes) kept on it,
// and its poster's waiters wake. It returns the same errors as Finish, and
// actions.ErrEmptyReason.
func (e *Engine) Fail(ctx context.Context, who identity.ID, id, reason string) (actions.Record, error) {
	if strings.TrimSpace(reason) == "" {
		return actions.Record{}, fmt.Errorf("fail %s: %w: say why it could not be done", label(id), actions.ErrEmptyReason)
	}
	if err := actions.CheckText("reason", reason, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("fail %s: %w", label(id), err)
	}
	return e.end(ctx, "fail", who, id, Update{State: actions.Failed, Text: reason})
}

// end ends an action who holds as u says.
func (e *Engine) end(ctx context.Context, op string, who identity.ID, id string, u Update) (actions.Record, error) {
	u.By, u.Told = string(who), ToldIfPerson
	rec, err := e.settle(ctx, op, who, id, u)
	if err != nil {
		return actions.Record{}, err
	}
	e.log.Info("action ended", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, nil
}

// Release implements actions.Source: the action who holds goes back to
// open, at its place in the posting order, and the waiters that may take
// it wake, in every process. It returns the same errors as Finish.
func (e *Engine) Release(ctx context.Context, who identity.ID, id string) (actions.Record, error) {
	rec, err := e.settle(ctx, "release", who, id, Update{State: actions.Open})
	if err != nil {
		return actions.Record{}, err
	}
	e.log.Info("action released", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return rec, nil
}

// settle writes u to an action who holds, and says why not when who does
// not hold it.
func (e *Engine) settle(ctx context.Context, op string, who identity.ID, id string, u Update) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, unknown(op, id)
	}
	var rec actions.Record
	err := e.write(ctx, op, func(t *txn) error {
		var held bool
		var err error
		if rec, held, err = e.changeTx(t, seq, string(who), u); err != nil || held {
			return err
		}
		cur, err := t.Action(seq)
		if err != nil {
			return named(op, id, err)
		}
		return notHeld(op, who, cur)
	})
	if err != nil {
		return actions.Record{}, wrap(op, id, err)
	}
	e.s.Holding(who, -1)
	return rec, nil
}

// notHeld says why who could not op the action cur.
func notHeld(op string, who identity.ID, cur actions.Record) error {
	switch {
	case cur.State.Ended():
		return actions.EndedErr(op, cur)
	case cur.State == actions.Open:
		return fmt.Errorf("%s: action %s is open, not held by %s: %w", op, cur.ID, who, actions.ErrNotHeld)
	}
	return fmt.Errorf("%s: action %s is held by %s, not %s: %w", op, cur.ID, cur.Holder, who, actions.ErrNotHeld)
}

// changeTx writes u to the action seq inside t (while holder holds it,
// when holder is set; ok is false otherwise) and wakes whom that concerns.
// It is the one place every end of an action passes (finish, fail,
// cancel) and every claim its holder puts back: what must follow an end in
// the same transaction (opening its dependents or cancelling its waiters,
// see afterEnd; releasing what it reserved) belongs here.
func (e *Engine) changeTx(t *txn, seq int64, holder string, u Update) (_ actions.Record, ok bool, _ error) {
	rec, ok, err := t.Update(seq, holder, u)
	if err != nil || !ok {
		return rec, ok, err
	}
	if err := e.endServedTx(t, rec); err != nil {
		return rec, ok, err
	}
	if !u.State.Ended() {
		return rec, true, t.emit(ClaimableFor(rec))
	}
	if err := t.emit(EndedFor(rec)); err != nil {
		return rec, true, err
	}
	return rec, true, e.afterEnd(t, rec)
}

// Cancel implements actions.Source: an open, blocked or claimed action
// becomes cancelled, with an optional reason, and its holder's next finish
// is refused with that reason; what waits for it is cancelled too (see
// afterEnd). by is a person or an identity of the agent
// that posted it (actions.ErrNotPoster otherwise). A poster that cancels
// its own action has heard of it already; anyone else's cancel wakes the
// poster's waiter.
func (e *Engine) Cancel(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error) {
	who := identity.ID(by)
	if err := actions.CheckPoster(who); err != nil {
		return actions.Record{}, fmt.Errorf("cancel %s: %w", label(id), err)
	}
	if err := actions.CheckText("reason", reason, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("cancel %s: %w", label(id), err)
	}
	rec, err := e.manage(ctx, "cancel", who, id, func(t *txn, cur actions.Record) (actions.Record, error) {
		told := NotTold
		if cur.From == string(who) || actions.IsUser(cur.From) {
			told = ToldNow
		}
		rec, _, err := e.changeTx(t, cur.Seq, "", Update{State: actions.Cancelled, Text: reason, By: string(who), Told: told})
		return rec, err
	})
	if err != nil {
		return actions.Record{}, err
	}
	e.log.Info("action cancelled", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Holder, rec.Holder)
	return rec, nil
}

// Readdress implements actions.Board: an open or blocked action goes to to
// ("", an agent name or a live identity), and the waiters that may now
// take an open one wake, in every process. by is a person or an identity of the poster's
// agent.
func (e *Engine) Readdress(ctx context.Context, by actions.Poster, id, to string) (actions.Record, error) {
	who := identity.ID(by)
	if err := actions.CheckPoster(who); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", label(id), err)
	}
	if err := actions.CheckRecipient(to); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", label(id), err)
	}
	if err := e.checkLive(ctx, to); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", label(id), err)
	}
	rec, err := e.manage(ctx, "readdress", who, id, func(t *txn, cur actions.Record) (actions.Record, error) {
		if cur.State == actions.Claimed {
			return actions.Record{}, fmt.Errorf("readdress: action %s is held by %s; it can be re-addressed once it is released (or cancel it): %w",
				cur.ID, cur.Holder, actions.ErrNotOpen)
		}
		rec, err := t.Readdress(cur.Seq, to)
		if err != nil || rec.State != actions.Open {
			return rec, err // a blocked action wakes nobody until it opens
		}
		if err := e.readdressedTx(t, rec); err != nil {
			return actions.Record{}, err
		}
		return rec, t.emit(ClaimableFor(rec))
	})
	if err != nil {
		return actions.Record{}, err
	}
	e.log.Info("action re-addressed", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.To, rec.To)
	return rec, nil
}

// manage runs op (cancel, readdress) on an action that who may manage
// (see actions.MayManage), as alter does.
func (e *Engine) manage(ctx context.Context, op string, who identity.ID, id string,
	change func(t *txn, cur actions.Record) (actions.Record, error)) (actions.Record, error) {
	return e.alter(ctx, op, id, func(cur actions.Record) error {
		if !actions.MayManage(who, cur.From) {
			return fmt.Errorf("%s: action %s was posted by %s; only a person or an identity of its agent may %s it: %w",
				op, id, cur.From, op, actions.ErrNotPoster)
		}
		return nil
	}, change)
}

// alter runs op on the action id: in one write transaction it reads the
// action, refuses an unknown or ended one and one may refuses, then lets
// change change it. Its errors name op and the action.
func (e *Engine) alter(ctx context.Context, op string, id string, may func(cur actions.Record) error,
	change func(t *txn, cur actions.Record) (actions.Record, error)) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, unknown(op, id)
	}
	var rec actions.Record
	err := e.write(ctx, op, func(t *txn) error {
		cur, err := t.Action(seq)
		switch {
		case err != nil:
			return named(op, id, err)
		case cur.State.Ended():
			return actions.EndedErr(op, cur)
		}
		if err := may(cur); err != nil {
			return err
		}
		rec, err = change(t, cur)
		return err
	})
	if err != nil {
		return actions.Record{}, wrap(op, id, err)
	}
	return rec, nil
}
