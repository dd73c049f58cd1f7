package pgboard

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// writerAndListener opens two Boards on a new database and returns the
// first and the second's listener, once it is connected.
func writerAndListener(t *testing.T) (*Board, *listener) {
	t.Helper()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	writer := openTest(t, url, nil)
	l := openTest(t, url, nil).listen
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.up
	}, 10*time.Second, 10*time.Millisecond, "the reader's listener connects")
	return writer, l
}

// A change that concerns one agent wakes, in another Board, only the
// waiters of that agent (and those of every event); one that concerns
// everyone wakes them all. A listener receives notifications in commit
// order, so once a later one has reached it, an earlier one that should
// have woken a waiter has too.
func TestListener_WakesOnlyWhomItConcerns(t *testing.T) {
	writer, l := writerAndListener(t)

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
