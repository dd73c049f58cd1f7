package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// waiter is what the board's waiting calls share (see wakeup.Wait).
func (e *Engine) waiter(beforeSleep func()) wakeup.Waiter {
	return wakeup.Waiter{Board: e.cfg.Life.Context(), Closed: e.s.Closed, Poll: e.cfg.SafetyPoll, BeforeSleep: beforeSleep}
}

// Head implements actions.Board: the change cursor of the board as it is
// now. Changes from it reports only what changes afterwards.
func (e *Engine) Head(ctx context.Context) (actions.Cursor, error) {
	rev, err := e.s.Head(ctx)
	if err != nil {
		return "", fmt.Errorf("head: %w", err)
	}
	return e.s.Cursors().Rev(rev, -1), nil
}

// Changes implements actions.Board: the actions that changed after the
// change cursor after (made by Head or Changes; "" is the start, so the
// first page is every action), in the order of their latest change, each
// at most once per page and in its current state. When nothing has
// changed it waits, up to timeout, for a change in any process. On timeout
// the page is empty and its cursor is after. It returns ctx's error when
// ctx ends first, and actions.ErrBadCursor for a cursor that is not a
// change cursor of this board (List's cursors are not).
//
// A member whose process died departs at each look, so its claims show as
// open again at once; a claim whose holder is gone otherwise is marked
// HolderGone.
func (e *Engine) Changes(ctx context.Context, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	cur := e.s.Cursors()
	rev, seq, err := cur.ParseRev(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("changes: %w", err)
	}
	if err := e.s.Closed(); err != nil {
		return actions.Page{}, err
	}
	cursor := cur.Rev(rev, seq)
	deadline := time.Now().Add(timeout)
	page, found, err := wakeup.Wait(ctx, e.waiter(nil), "changes", timeout, e.cfg.Hub.Changes,
		func(ctx context.Context) (actions.Page, bool, time.Duration, error) {
			e.reap(ctx)
			rows, nap, err := e.s.ChangesAfter(ctx, rev, seq, e.cfg.PageSize)
			p := pages.Page(rows, cursor, func(r pages.Row) actions.Cursor { return cur.Rev(r.Rev, r.Seq) })
			return p, len(p.Records) > 0, nap, err
		})
	if err != nil {
		return actions.Page{}, err
	}
	if !found {
		return actions.Page{Records: []actions.Record{}, Cursor: cursor}, nil
	}
	mctx, cancel := context.WithDeadline(ctx, deadline.Add(finishSlack))
	defer cancel()
	e.markGone(mctx, page.Records)
	return page, nil
}

// Await implements actions.Source. It returns the ended actions among ids
// as soon as there is one, waking when an action ends in any process, and
// marks told those that by posted. An id that names no action is
// actions.ErrUnknownAction before any wait.
func (e *Engine) Await(ctx context.Context, by actions.Poster, ids []string, timeout time.Duration) ([]actions.Record, error) {
	if len(ids) == 0 {
		return nil, errors.New("await: no action ids given")
	}
	seqs := make([]int64, 0, len(ids))
	for _, id := range ids {
		seq, ok := position.ParseActionID(id)
		if !ok {
			return nil, fmt.Errorf("await: %w", unknown("", id))
		}
		seqs = append(seqs, seq)
	}
	// The ids are checked in the wait's first look, so that the check too
	// ends by the wait's timeout whatever the storage does; a wait that
	// looks once checks them within the bound of one look.
	checked := false
	if timeout <= 0 {
		kctx, cancel := context.WithTimeout(ctx, e.cfg.OnceBound)
		err := e.known(kctx, ids, seqs)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("await: %w", err)
		}
		checked = true
	}
	var refused error // an unknown id: the answer, even as the timeout passes
	deadline := time.Now().Add(timeout)
	recs, found, err := wakeup.Wait(ctx, e.waiter(e.cfg.BeforeSleep), "await", timeout, e.cfg.Hub.EveryEnd,
		func(ctx context.Context) ([]actions.Record, bool, time.Duration, error) {
			if !checked {
				if err := e.known(ctx, ids, seqs); err != nil {
					if errors.Is(err, actions.ErrUnknownAction) {
						refused = err
					}
					return nil, false, 0, err
				}
				checked = true
			}
			e.reap(ctx)
			recs, err := e.s.EndedAmong(ctx, seqs)
			return recs, len(recs) > 0, 0, err
		})
	if refused != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("await: %w", refused)
	}
	if err != nil {
		return nil, err
	}
	if !found {
		return []actions.Record{}, nil
	}
	e.markTold(ctx, deadline, identity.ID(by), recs)
	return recs, nil
}

// known returns actions.ErrUnknownAction, naming it, for the first of ids
// (whose seqs are seqs) that names no action.
func (e *Engine) known(ctx context.Context, ids []string, seqs []int64) error {
	known, err := e.s.Known(ctx, seqs)
	if err != nil {
		return err
	}
	for i, s := range seqs {
		if !slices.Contains(known, s) {
			return unknown("", ids[i])
		}
	}
	return nil
}

// finishSlack is how long past its timeout a wait that found something
// may take to finish (marking what it found), whatever the storage does.
const finishSlack = 500 * time.Millisecond

// markTold records that who has heard the outcomes of the records it
// posted, by deadline (the wait's) and finishSlack, also when ctx has
// ended: it returns by then whatever the storage does. A failure is
// logged: the poster's waiter may then wake for an outcome it has already
// seen, which is harmless.
func (e *Engine) markTold(ctx context.Context, deadline time.Time, who identity.ID, recs []actions.Record) {
	var seqs []int64
	for _, r := range recs {
		if r.From == string(who) {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) == 0 {
		return
	}
	by := deadline.Add(finishSlack)
	if d, ok := ctx.Deadline(); ok && d.Before(by) {
		by = d.Add(finishSlack)
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	err := e.write(wctx, "mark told", func(t *txn) error { return t.MarkTold(seqs) })
	if err != nil {
		e.log.Warn("cannot record that the poster heard", logkey.Identity, string(who), logkey.Err, err)
	}
}

// takeOutcome marks told, and returns, an outcome who should hear. It
// reads first, so that idle looks do not write.
func (e *Engine) takeOutcome(ctx context.Context, who identity.ID) (actions.Record, bool, error) {
	if _, err := e.s.Untold(ctx, who); err != nil {
		if err == actions.ErrUnknownAction {
			err = nil
		}
		return actions.Record{}, false, err
	}
	var (
		rec   actions.Record
		found bool
	)
	err := e.write(ctx, "tell outcome", func(t *txn) error {
		var err error
		rec, found, err = t.TellOutcome(who)
		return err
	})
	if u := (*Unsure)(nil); errors.As(err, &u) {
		// Nobody hears it now: settleTelling tells it again if the
		// telling committed.
		if found {
			e.settleTelling(who, rec, u)
		}
		return actions.Record{}, false, nil
	}
	if err != nil || !found {
		return actions.Record{}, false, err
	}
	e.log.Info("outcome told", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, true, nil
}

// settleTelling finds out, in the background, whether the telling of
// rec's outcome to who, whose commit went unanswered by the call's
// deadline, committed (see settleWrite); the call has returned without
// it. If it did, the outcome is marked untold again, and its poster's
// agent woken, so that it is told again.
func (e *Engine) settleTelling(who identity.ID, rec actions.Record, u *Unsure) {
	e.settleWrite(u, "the telling of an outcome", "its poster is not woken for it", rec.ID, who, func(ctx context.Context) {
		err := e.write(ctx, "untell outcome", func(t *txn) error {
			if err := t.Untell([]int64{rec.Seq}); err != nil {
				return err
			}
			return t.emit(EndedFor(rec))
		})
		if err != nil {
			e.log.Error("cannot mark untold an outcome nobody heard; its poster is not woken for it",
				logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Err, err)
			return
		}
		e.log.Info("outcome untold: its telling's answer came after the call had returned", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	})
}
