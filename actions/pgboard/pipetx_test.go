package pgboard

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// tripCounter counts the round trips of a pool: each query sent alone and
// each batch is one.
type tripCounter struct {
	mu    sync.Mutex
	trips []string
}

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL)
	return ctx
}

func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	c.add("batch: " + strings.Join(sqls, "; "))
	return ctx
}

func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (c *tripCounter) add(sql string) {
	if strings.HasPrefix(sql, "LISTEN ") || sql == watchSQL {
		return // the listener's connection, which copies the pool's settings
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips = append(c.trips, sql)
}

// take returns the trips so far and forgets them.
func (c *tripCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trips
	c.trips = nil
	return t
}

// A post is three round trips: its BEGIN with the version check and its
// id, its insert, and its notification with its COMMIT (see pipeTx). It
// was five: a BEGIN and a NOTIFY of their own.
func TestPipeTx_PostInThreeTrips(t *testing.T) {
	t.Parallel()
	trips := &tripCounter{}
	b := openTest(t, "", &Options{tracer: trips})
	draft := actions.Draft{To: "reviewer", Title: "job"}
	_, err := b.Post(t.Context(), "user:alice", draft) // statements described once per connection
	require.NoError(t, err)
	trips.take()
	_, err = b.Post(t.Context(), "user:alice", draft)
	require.NoError(t, err)
	got := trips.take()
	require.Len(t, got, 3, "%q", got)
	require.True(t, strings.HasPrefix(got[0], "batch: BEGIN; "), got[0])
	require.True(t, strings.HasSuffix(got[2], "; COMMIT"), got[2])
	require.Contains(t, got[2], "pg_notify", "the notification goes with the commit")
}

// A notification that fails aborts its transaction: nothing commits, and
// the connection goes back to the pool outside any transaction.
func TestPipeTx_FailedNotificationCommitsNothing(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", nil)
	ctx := t.Context()
	c, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE TEMP TABLE pipe_test (x int)`)
	require.NoError(t, err)
	tx := newPipeTx(c)
	_, err = b.firstTrip(ctx, tx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO pipe_test VALUES (1)`)
	require.NoError(t, err)
	tx.notify(`SELECT pg_notify('bee_test', repeat('x', 9000))`) // too long a payload
	require.Error(t, tx.Commit(ctx))
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus(), "the aborted transaction is ended")
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pipe_test`).Scan(&n))
	require.Zero(t, n, "the insert did not commit")
	require.ErrorIs(t, tx.Rollback(ctx), pgx.ErrTxClosed)
	tx.release()
}
