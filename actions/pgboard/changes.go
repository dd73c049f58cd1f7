package pgboard

import (
	"context"
	"time"

	"github.com/tractat-us/bee/actions/internal/pages"
)

// horizon is the oldest transaction still running: every change with a rev
// below it has committed (or never will), and no later commit can carry a
// rev below it.
const horizon = `pg_snapshot_xmin(pg_current_snapshot())::text::bigint`

// Head implements engine.Store: below the oldest transaction still
// running, so that Changes from it reports what changes afterwards (and,
// rarely, a change that was committing as Head looked).
func (s *store) Head(ctx context.Context) (int64, error) {
	var h int64
	err := s.b().read(ctx, "head", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT `+horizon).Scan(&h)
	})
	return max(h-1, 0), err
}

// ChangesAfter implements engine.Store: the changes after (rev, seq) that
// no older transaction still running could precede. A change is reported
// once every transaction that began before it has ended, so one committed
// late under a lower number is never skipped; a long transaction elsewhere
// on the server delays the report, not loses it.
func (s *store) ChangesAfter(ctx context.Context, rev, seq int64, limit int) ([]pages.Row, time.Duration, error) {
	rows, err := s.page(ctx, "changes", true, `SELECT `+everyCols+`, rev FROM bee_every_action
		WHERE (rev, seq) > ($1, $2) AND rev < `+horizon+` ORDER BY rev, seq LIMIT $3`, rev, seq, limit)
	if err != nil || len(rows) > 0 {
		return rows, 0, err
	}
	return nil, s.b().nextLook(ctx, rev, seq), nil
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
		return b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bee_every_action WHERE (rev, seq) > ($1, $2))`,
			rev, seq).Scan(&pending)
	})
	if pending {
		return pendingPoll
	}
	return 0
}

// pendingPoll is how often Changes looks while a change waits behind an
// older transaction.
const pendingPoll = 20 * time.Millisecond
