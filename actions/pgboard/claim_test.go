package pgboard

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// A claim that finds nothing writes nothing: it locks no row (the member
// row and the actions keep the lock word they had), so it forces no
// transaction id and commits nothing. One that finds an action locks the
// member row, then claims.
func TestClaim_EmptyWritesNothing(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	_, err := b.Post(t.Context(), "user:alice", actions.Draft{To: "someone-else", Title: "not for w"})
	require.NoError(t, err)

	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rowWords := func() (member, action string) {
		t.Helper()
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT
			(SELECT xmin::text || '/' || xmax::text FROM bee_members WHERE identity = $1),
			(SELECT string_agg(xmin::text || '/' || xmax::text, ',') FROM bee_actions)`, string(who)).Scan(&member, &action))
		return member, action
	}
	m0, a0 := rowWords()
	for range 3 {
		p, err := b.Next(t.Context(), who, "", 0)
		require.NoError(t, err)
		require.Empty(t, p.Records)
	}
	m1, a1 := rowWords()
	require.Equal(t, m0, m1, "the member row untouched by empty claims")
	require.Equal(t, a0, a1, "the actions untouched by empty claims")

	mine := post(t, b, "for anyone")
	p, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, mine.ID, p.Records[0].ID)
	m2, _ := rowWords()
	require.NotEqual(t, m1, m2, "a claim locks its claimant's member row")
}

// A claim's commit carries no NOTIFY: claims wake nobody waiting for
// work, and those who watch every change hear of changes coalesced, at
// most one notification per changeWindow (and one more at its end).
func TestClaim_NotificationsCoalesced(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)

	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// It watches the change channel as a Board does (see watchLock).
	_, err = conn.Exec(t.Context(), watchSQL, watchLock, b.id)
	require.NoError(t, err)
	for _, k := range []engine.Kind{engine.Claimable, engine.Changed} {
		_, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{b.channel(k)}.Sanitize())
		require.NoError(t, err)
	}
	// drain counts the notifications conn has received, per channel,
	// once b has sent its last change notification: a marker conn sends
	// itself comes after every one sent before it.
	drain := func() map[string]int {
		require.Eventually(t, func() bool {
			b.changeMu.Lock()
			defer b.changeMu.Unlock()
			return !b.changeBusy
		}, testtime.Bound(10*time.Second), time.Millisecond, "the change notifications are sent")
		_, err := conn.Exec(t.Context(), `SELECT pg_notify($1, 'marker')`, b.channel(engine.Changed))
		require.NoError(t, err)
		got := map[string]int{}
		for {
			n, err := conn.WaitForNotification(t.Context())
			require.NoError(t, err)
			if n.Payload == "marker" {
				return got
			}
			got[n.Channel]++
		}
	}

	const n = 30
	for range n {
		post(t, b, "job")
	}
	drain()

	who := mint(t, "w")
	start := time.Now()
	for range n {
		p, err := b.Next(t.Context(), who, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
	}
	took := time.Since(start)
	got := drain()
	t.Logf("%d claims in %v: notifications %v", n, took.Round(time.Millisecond), got)
	require.Zero(t, got[b.channel(engine.Claimable)], "a claim wakes no one waiting for work")
	changes := got[b.channel(engine.Changed)]
	require.Positive(t, changes, "those who watch every change hear of the claims")
	require.LessOrEqual(t, changes, int(took/changeWindow)+2, "at most one change notification per window, and one at its end")
}

// Settling a lost claim ends the backend its statement went to, and no
// other: not the one that asks, nor a bystander's, when that backend is
// already gone.
func TestClaim_SettleEndsOnlyItsBackend(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	bystander, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer bystander.Close(context.Background())
	target, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer target.Close(context.Background())

	// Before the fix, each ask ended its own backend too, and asked again
	// until its context ended.
	ctx, cancel := context.WithTimeout(t.Context(), testtime.Bound(20*time.Second))
	defer cancel()
	a := claimAttempt{b: b, w: engine.Want{Who: mint(t, "w"), Skip: []int64{}}, token: newClaimToken(), pids: []uint32{target.PgConn().PID()}}
	got, err := a.resolve(ctx)
	require.NoError(t, err)
	require.False(t, got.OK)
	require.Error(t, target.Ping(t.Context()), "the statement's backend was ended")
	require.NoError(t, bystander.Ping(t.Context()), "a bystander's backend lives")

	a.pids = []uint32{target.PgConn().PID()} // gone now
	_, err = a.resolve(ctx)
	require.NoError(t, err)
	require.NoError(t, bystander.Ping(t.Context()), "a bystander's backend lives when the statement's is gone")
}
