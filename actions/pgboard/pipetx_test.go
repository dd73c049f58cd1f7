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

// A post is two round trips: its BEGIN with the version check, its id and
// its insert, then its notification with its COMMIT (see pipeTx). It was
// five: a BEGIN, the version check and a NOTIFY of their own.
func TestPipeTx_PostInTwoTrips(t *testing.T) {
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
	require.Len(t, got, 2, "%q", got)
	require.True(t, strings.HasPrefix(got[0], "batch: BEGIN; "), got[0])
	require.Contains(t, got[0], "INSERT INTO bee_actions", "the insert goes with the BEGIN")
	require.True(t, strings.HasSuffix(got[1], "; COMMIT"), got[1])
	require.Contains(t, got[1], "pg_notify", "the notification goes with the commit")
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
	tx := newPipeTx(c, b.firstTrip())
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

// An end is four round trips: its BEGIN with the version check, its id
// and the end itself (the row moved to bee_ended_actions as it is
// written), the release of what it reserved, the look for its
// dependents, and its notification with its COMMIT. It was seven: a BEGIN
// and the version check of their own, and the move after the update.
func TestPipeTx_EndInFourTrips(t *testing.T) {
	t.Parallel()
	trips := &tripCounter{}
	b := openTest(t, "", &Options{tracer: trips})
	who := mint(t, "w")
	end := func() []string {
		t.Helper()
		r, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "job"})
		require.NoError(t, err)
		p, err := b.Next(t.Context(), who, "", 0)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		trips.take()
		done, err := b.Finish(t.Context(), who, r.ID, "ok")
		require.NoError(t, err)
		require.Equal(t, actions.Done, done.State)
		require.Equal(t, "ok", done.Result)
		return trips.take()
	}
	end() // statements described once per connection
	got := end()
	for i, trip := range got {
		t.Logf("trip %d: %.160s", i, trip)
	}
	require.Len(t, got, 4, "%q", got)
	require.True(t, strings.HasPrefix(got[0], "batch: BEGIN; "), got[0])
	require.Contains(t, got[0], "INSERT INTO bee_ended_actions", "the end goes with the BEGIN, and moves the row")
	require.True(t, strings.HasSuffix(got[3], "; COMMIT"), got[3])
}
