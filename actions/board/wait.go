package board

import (
	"context"
	"fmt"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/wakeup"
)

// Head returns the change cursor of the board as it is now: Wait from it
// reports only what changes afterwards.
func (b *Board) Head(ctx context.Context) (actions.Cursor, error) {
	var rev int64
	err := b.read(ctx, "head", func(ctx context.Context) error {
		return b.row(ctx, `SELECT coalesce(max(rev), 0) FROM actions`).Scan(&rev)
	})
	if err != nil {
		return "", fmt.Errorf("head: %w", err)
	}
	return b.cursors().Rev(rev, -1), nil
}

// Changes implements actions.Board: the actions that changed after the change cursor after (made
// by Head or Wait; "" is the start, so the first page is every action), in
// the order of their latest change, each at most once per page and in its
// current state. When nothing has changed it waits, up to timeout, for a
// change in any process: a post, claim, finish, release or departure. On
// timeout the page is empty and its cursor is after. Wait returns ctx's
// error when ctx ends first, and actions.ErrBadCursor for a cursor that is
// not a change cursor of this board (List's cursors are not).
//
// A member whose process died departs at each look, so its claims show as
// open again at once; a claim whose holder is gone otherwise is marked
// HolderGone.
func (b *Board) Changes(ctx context.Context, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	rev, seq, err := b.cursors().ParseRev(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("wait: %w", err)
	}
	if err := b.closed(); err != nil {
		return actions.Page{}, err
	}
	b.notify.watch()
	cursor := b.cursors().Rev(rev, seq)
	page, found, err := wakeup.Wait(ctx, b.waiter(), "wait", timeout, b.notify.changeCh,
		func(ctx context.Context) (actions.Page, bool, time.Duration, error) {
			p, err := b.changesAfter(ctx, rev, seq, cursor)
			return p, len(p.Records) > 0, 0, err
		})
	if err != nil {
		return actions.Page{}, err
	}
	if !found {
		return actions.Page{Records: []actions.Record{}, Cursor: cursor}, nil
	}
	b.markGone(ctx, page.Records)
	return page, nil
}

// changesAfter is one look of Changes: the page of changes after (rev,
// seq), empty (with cursor) when there are none, once the dead members
// have departed.
func (b *Board) changesAfter(ctx context.Context, rev, seq int64, cursor actions.Cursor) (actions.Page, error) {
	b.reap(ctx)
	page := actions.Page{Records: []actions.Record{}, Cursor: cursor}
	err := b.read(ctx, "wait", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT `+recordCols+`, rev FROM actions
			WHERE (rev, seq) > (?, ?) ORDER BY rev, seq LIMIT ?`, rev, seq, b.opts.PageSize)
		if err != nil {
			return err
		}
		defer rows.Close()
		return pages.Fill(&page, rows, func() (actions.Record, actions.Cursor, error) {
			var r int64
			rec, err := scanRecord(rows, &r)
			return rec, b.cursors().Rev(r, rec.Seq), err
		})
	})
	return page, err
}

// waiter is what this Board's waiting calls share (see wakeup.Wait).
func (b *Board) waiter() wakeup.Waiter {
	return wakeup.Waiter{Board: b.ctx, Closed: b.closed, Poll: b.opts.SafetyPoll}
}
