package pgboard

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// writerAndListener opens two Boards on a new database and returns the
// first and the second's listener, once it is connected.
func writerAndListener(t *testing.T) (*Board, *listener) {
	t.Helper()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	writer := openTest(t, url, nil)
	return writer, listening(t, openTest(t, url, nil))
}

// listening returns b's listener once it is connected.
func listening(t *testing.T, b *Board) *listener {
	t.Helper()
	l := b.listen
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.up
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "the listener connects")
	return l
}

// A change that concerns one agent wakes, in another Board, only the
// waiters of that agent (and those of every event); one that concerns
// everyone wakes them all. A listener receives notifications in commit
// order, so once a later one has reached it, an earlier one that should
// have woken a waiter has too.
func TestListener_WakesOnlyWhomItConcerns(t *testing.T) {
	// The listener watches every change (EveryEnd), which a Board does on a
	// connection of its own (see listener.watches): here from the start,
	// so that its move from the machine's listener, which wakes every
	// waiter, does not come mid-test.
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	writer := openTest(t, url, nil)
	l := listening(t, openTest(t, url, &Options{OwnListener: true}))

	x := mint(t, "x")
	h := l.hub
	forX, forY := h.Claimable("x"), h.Claimable("y")
	endedX, endedY, endedAll := h.Ended("x"), h.Ended("y"), h.EveryEnd()

	require.NoError(t, writer.Join(t.Context(), actions.Member{ID: x, PID: os.Getpid()}))
	a, err := writer.Post(t.Context(), "user:alice", actions.Draft{To: string(x), Title: "for x"})
	require.NoError(t, err)
	boardtest.WaitClosed(t, forX, "x's waiter, for an action addressed to x's identity")
	p, err := writer.Next(t.Context(), x, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	_, err = writer.Finish(t.Context(), x, a.ID, "")
	require.NoError(t, err)
	boardtest.WaitClosed(t, endedAll, "Await, for a person's action ended")
	require.False(t, boardtest.Closed(forY), "y's waiter woken for x's action")
	require.False(t, boardtest.Closed(endedX), "x's outcome waiter woken for a person's action")

	endedAll = h.EveryEnd()
	b, err := writer.Post(t.Context(), actions.Agent(x), actions.Draft{Title: "from x"})
	require.NoError(t, err)
	boardtest.WaitClosed(t, forY, "y's waiter, for an action for anyone")
	p, err = writer.Next(t.Context(), x, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	_, err = writer.Finish(t.Context(), x, b.ID, "")
	require.NoError(t, err)
	boardtest.WaitClosed(t, endedX, "x's outcome waiter, for x's action ended")
	boardtest.WaitClosed(t, endedAll, "Await, for x's action ended")
	require.False(t, boardtest.Closed(endedY), "y's outcome waiter woken for x's action")
}

// PostgreSQL delivers a notification only to the Boards it concerns: a
// Board whose waiters are all of agent y hears nothing of an action
// addressed to x, or of its claim and end, and hears one notification for
// an action for anyone.
func TestListener_HearsOnlyItsAgents(t *testing.T) {
	writer, l := writerAndListener(t)
	heard := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.heard
	}

	forY, endedY := l.hub.Claimable("y"), l.hub.Ended("y") // LISTENs on y's channels
	before := heard()

	x := mint(t, "x")
	require.NoError(t, writer.Join(t.Context(), actions.Member{ID: x, PID: os.Getpid()}))
	a, err := writer.Post(t.Context(), actions.Agent(x), actions.Draft{To: "x", Title: "for x"})
	require.NoError(t, err)
	p, err := writer.Next(t.Context(), x, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	_, err = writer.Finish(t.Context(), x, a.ID, "")
	require.NoError(t, err)

	// Notifications reach a listener in commit order: once the one for
	// anyone has, any earlier one sent to this Board has too.
	_, err = writer.Post(t.Context(), "user:alice", actions.Draft{Title: "for anyone"})
	require.NoError(t, err)
	boardtest.WaitClosed(t, forY, "y's waiter, for an action for anyone")
	require.Equal(t, before+1, heard(), "the Board heard of x's action, its claim or its end")
	require.False(t, boardtest.Closed(endedY), "y's outcome waiter woken for x's action")
}

// rawListener LISTENs on channels from a connection of its own, as a bee
// before the watch lock did, and returns the channels of the
// notifications it receives.
func rawListener(t *testing.T, url string, channels ...string) <-chan string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	for _, ch := range channels {
		_, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{ch}.Sanitize())
		require.NoError(t, err)
	}
	heard := make(chan string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			heard <- n.Channel
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close(context.Background())
	})
	return heard
}

// upTo returns the channels heard until (and without) the first
// notification on until, which must come within a bound.
func upTo(t *testing.T, heard <-chan string, until string) []string {
	t.Helper()
	var got []string
	timeout := time.After(testtime.Bound(10 * time.Second))
	for {
		select {
		case ch := <-heard:
			if ch == until {
				return got
			}
			got = append(got, ch)
		case <-timeout:
			t.Fatalf("no notification on %s; heard %v", until, got)
		}
	}
}

// Nothing goes to the change channel while no Board watches it: a post
// for an agent notifies that agent's channel only, and its claim and its
// end (the action a person's) notify nothing. Once a Board watches (runs
// Changes), each of the three notifies the change channel too.
func TestNotify_ChangeChannelOnlyWhenWatched(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	writer := openTest(t, url, nil)
	x := mint(t, "x")
	require.NoError(t, writer.Join(t.Context(), actions.Member{ID: x, PID: os.Getpid()}))
	forX := writer.channelFor(engine.Event{Kind: engine.Claimable, Key: "x"})
	change := writer.channel(engine.Changed)
	heard := rawListener(t, url, forX, change,
		writer.channelFor(engine.Event{Kind: engine.Ended, Key: wakeup.People}))
	changeSent := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			writer.changeMu.Lock()
			defer writer.changeMu.Unlock()
			return !writer.changeBusy
		}, testtime.Bound(10*time.Second), time.Millisecond, "the claim's change notification is done with")
	}
	// A post for x, its claim and its end, then a post for x as a fence:
	// notifications come in commit order, so once the fence's has come,
	// every one the round sent has too. It returns what came between.
	round := func() []string {
		t.Helper()
		a, err := writer.Post(t.Context(), "user:alice", actions.Draft{To: "x", Title: "for x"})
		require.NoError(t, err)
		require.Empty(t, upTo(t, heard, forX), "before the round")
		p, err := writer.Next(t.Context(), x, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		changeSent()
		_, err = writer.Finish(t.Context(), x, a.ID, "")
		require.NoError(t, err)
		fence, err := writer.Post(t.Context(), "user:alice", actions.Draft{To: "x", Title: "fence"})
		require.NoError(t, err)
		got := upTo(t, heard, forX)
		p, err = writer.Next(t.Context(), x, "", time.Second)
		require.NoError(t, err)
		require.Equal(t, fence.ID, p.Records[0].ID)
		changeSent()
		_, err = writer.Finish(t.Context(), x, fence.ID, "")
		require.NoError(t, err)
		return got
	}

	require.Empty(t, round(), "unwatched: the post for x told x alone; its claim and end told nobody")

	listening(t, openTest(t, url, nil)).hub.Changes() // LISTENs on the change channel, with the watch lock
	require.Equal(t, []string{change, change, change}, round(),
		"watched: the post (after x's channel), its claim and its end tell the change channel")
}

// A Board that begins to watch the change channel waits until every
// transaction that found nobody watching has ended, so that it looks at
// the board only once their changes show (see watchLock).
func TestNotify_WatchWaitsForUnwatchedWriters(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	writer := openTest(t, url, nil)
	change := writer.channel(engine.Changed)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), notifyChangeSQL, change, watchLock, writer.id) // finds nobody: takes its stripe
	require.NoError(t, err)

	l := listening(t, openTest(t, url, nil))
	go l.hub.Changes()
	watching := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		done, ok := l.wanted[change]
		return ok && wakeup.Closed(done)
	}
	require.Never(t, watching, 300*time.Millisecond, 10*time.Millisecond, "watching while an unwatched writer's transaction runs")
	require.NoError(t, tx.Commit(t.Context()))
	require.Eventually(t, watching, testtime.Bound(10*time.Second), 10*time.Millisecond, "watching once it has ended")
}

// A claim is told on the change channel at the end of a window, not at
// once: its claimant goes on at once (here it finishes), and the
// notification does not run beside it on a second connection.
func TestNotify_ClaimToldAfterAWindow(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), watchSQL, watchLock, b.id) // it watches, as a Board does
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{b.channel(engine.Changed)}.Sanitize())
	require.NoError(t, err)

	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	posted := post(t, b, "job")
	n, err := conn.WaitForNotification(t.Context()) // the post's
	require.NoError(t, err)
	require.Equal(t, b.channel(engine.Changed), n.Channel)

	before := time.Now()
	p, err := b.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	_, err = b.Release(t.Context(), who, posted.ID) // the claimant goes on at once
	require.NoError(t, err)
	// Two notifications: the release's, in its commit, and the claim's, at
	// its window's end; the later of them comes a window after the claim
	// at the soonest (at once, when the claim was told at once).
	wctx, cancel := context.WithTimeout(t.Context(), testtime.Bound(10*time.Second))
	defer cancel()
	for range 2 {
		n, err = conn.WaitForNotification(wctx)
		require.NoError(t, err)
		require.Equal(t, b.channel(engine.Changed), n.Channel)
	}
	require.GreaterOrEqual(t, time.Since(before), changeWindow, "the claim told at its window's end")
}
