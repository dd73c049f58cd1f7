package pgboard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// horizon is the oldest transaction still running: every change with a rev
// below it has committed (or never will), and no later commit can carry a
// rev below it.
const horizon = `pg_snapshot_xmin(pg_current_snapshot())::text::bigint`

// Head implements actions.Board: the change cursor of the board as it is
// now. Changes from it reports what changes afterwards (and, rarely, a
// change that was committing as Head looked).
func (b *Board) Head(ctx context.Context) (actions.Cursor, error) {
	var h int64
	err := b.read(ctx, "head", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, `SELECT `+horizon).Scan(&h)
	})
	if err != nil {
		return "", fmt.Errorf("head: %w", err)
	}
	return b.cursors().Rev(max(h-1, 0), -1), nil
}

// Changes implements actions.Board: the actions that changed after the
// change cursor after (made by Head or Changes; "" is the start, so the
// first page is every action), in the order of their latest change, each
// at most once per page and in its current state. When nothing has changed
// it waits, up to timeout, for a change on any machine. On timeout the page
// is empty and its cursor is after. It returns ctx's error when ctx ends
// first, and actions.ErrBadCursor for a cursor that is not a change cursor
// of this board.
//
// A change is reported once every transaction that began before it has
// ended, so one committed late under a lower number is never skipped; a
// long transaction elsewhere on the server delays the report, not loses it.
func (b *Board) Changes(ctx context.Context, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	rev, seq, err := b.cursors().ParseRev(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("changes: %w", err)
	}
	if err := b.closed(); err != nil {
		return actions.Page{}, err
	}
	b.listen.watchChanges()
	cursor := b.cursors().Rev(rev, seq)
	page, found, err := wakeup.Wait(ctx, b.waiter(), "changes", timeout, b.listen.changeCh,
		func(ctx context.Context) (actions.Page, bool, time.Duration, error) {
			p, err := b.changesAfter(ctx, rev, seq, cursor)
			if err != nil || len(p.Records) > 0 {
				return p, err == nil, 0, err
			}
			return p, false, b.nextLook(ctx, rev, seq), nil
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
// seq) that no older transaction still running could precede, empty (with
// cursor) when there are none, once this machine's dead members have
// departed.
func (b *Board) changesAfter(ctx context.Context, rev, seq int64, cursor actions.Cursor) (actions.Page, error) {
	b.reap(ctx)
	var page actions.Page
	err := b.read(ctx, "changes", func(ctx context.Context) error {
		page = actions.Page{Records: []actions.Record{}, Cursor: cursor}
		rows, err := b.pool.Query(ctx, `SELECT `+recordCols+`, rev FROM bee_actions
			WHERE (rev, seq) > ($1, $2) AND rev < `+horizon+` ORDER BY rev, seq LIMIT $3`, rev, seq, b.opts.PageSize)
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

// nextLook is how long Changes sleeps at most after a look that found
// nothing: a change that has committed but waits behind an older
// transaction still running shows once that ends, so it looks again soon
// (pendingPoll); else the safety poll (0). Any change after the cursor
// counts, not only one still behind the horizon: the horizon may have
// passed it since the look, whose wake-up is spent.
func (b *Board) nextLook(ctx context.Context, rev, seq int64) time.Duration {
	var pending bool
	_ = b.read(ctx, "changes", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bee_actions WHERE (rev, seq) > ($1, $2))`,
			rev, seq).Scan(&pending)
	})
	if pending {
		return pendingPoll
	}
	return 0
}

// waiter is what this Board's waiting calls share (see wakeup.Wait).
func (b *Board) waiter() wakeup.Waiter {
	return wakeup.Waiter{Board: b.ctx, Closed: b.closed, Poll: b.opts.SafetyPoll}
}

// pendingPoll is how often Changes looks while a change waits behind an
// older transaction.
const pendingPoll = 20 * time.Millisecond

// Await implements actions.Source. It returns the ended actions among ids
// as soon as there is one, waking when an action ends on any machine, and
// marks told those that who posted. An id that names no action is
// actions.ErrUnknownAction before any wait.
func (b *Board) Await(ctx context.Context, by actions.Poster, ids []string, timeout time.Duration) ([]actions.Record, error) {
	who := identity.ID(by)
	if len(ids) == 0 {
		return nil, errors.New("await: no action ids given")
	}
	seqs := make([]int64, 0, len(ids))
	for _, id := range ids {
		seq, ok := position.ParseActionID(id)
		if !ok {
			return nil, fmt.Errorf("await: action %q: %w", id, actions.ErrUnknownAction)
		}
		seqs = append(seqs, seq)
	}
	var known []int64
	err := b.read(ctx, "await", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, `SELECT seq FROM bee_actions WHERE seq = ANY($1)`, seqs)
		if err != nil {
			return err
		}
		known, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("await: %w", err)
	}
	for i, s := range seqs {
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("await: action %q: %w", ids[i], actions.ErrUnknownAction)
		}
	}
	recs, found, err := wakeup.Wait(ctx, b.waiter(), "await", timeout, func() <-chan struct{} { return b.listen.endedCh("", true) },
		func(ctx context.Context) ([]actions.Record, bool, time.Duration, error) {
			b.reap(ctx)
			var recs []actions.Record
			err := b.read(ctx, "await", func(ctx context.Context) error {
				var err error
				recs, err = collect(b.pool.Query(ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = ANY($1)
					AND state IN ('done', 'failed', 'cancelled') ORDER BY seq`, seqs))
				return err
			})
			return recs, len(recs) > 0, 0, err
		})
	if err != nil {
		return nil, err
	}
	if !found {
		return []actions.Record{}, nil
	}
	b.markTold(ctx, who, recs)
	return recs, nil
}

// markTold records that who has heard the outcomes of the records it
// posted. A failure is logged: the poster's waiter may then wake for an
// outcome it has already seen, which is harmless.
func (b *Board) markTold(ctx context.Context, who identity.ID, recs []actions.Record) {
	var seqs []int64
	for _, r := range recs {
		if r.From == string(who) {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) == 0 {
		return
	}
	err := b.write(context.WithoutCancel(ctx), "mark told", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE bee_actions SET told_at = `+nowSQL("$2")+` WHERE told_at IS NULL AND seq = ANY($1)`, seqs, b.now())
		return err
	})
	if err != nil {
		b.log.Warn("cannot record that the poster heard", logkey.Identity, string(who), logkey.Err, err)
	}
}
