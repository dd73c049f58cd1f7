package board

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
)

// A change that concerns one agent wakes, in another Board, only the
// waiters of that agent (and those of every event); one that concerns
// everyone wakes them all. The other Board's watcher reads the notify
// files' events in order, so once a later event has reached it, an earlier
// one that should have woken a waiter has too.
func TestNotifier_WakesOnlyWhomItConcerns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	writer := openTest(t, path, nil)
	reader := openTest(t, path, nil)
	n, tell := reader.hub, writer.notify.tell

	forX, forY := n.Claimable("x"), n.Claimable("y")
	endedX, endedY, endedAll := n.Ended("x"), n.Ended("y"), n.EveryEnd()

	tell(engine.Event{Kind: engine.Claimable, Key: wakeup.ForRecipient("agent:x#0123abcd")})
	boardtest.WaitClosed(t, forX, "x's waiter, for an action addressed to an identity of x")
	tell(engine.Event{Kind: engine.Ended, Key: wakeup.ForPoster("user:alice")})
	boardtest.WaitClosed(t, endedAll, "Await, for a person's action ended")
	require.False(t, boardtest.Closed(forY), "y's waiter woken for x's action")
	require.False(t, boardtest.Closed(endedX), "x's outcome waiter woken for a person's action")

	endedAll = n.EveryEnd()
	tell(engine.Event{Kind: engine.Ended, Key: wakeup.ForPoster("agent:x#0123abcd")})
	boardtest.WaitClosed(t, endedX, "x's outcome waiter, for x's action ended")
	boardtest.WaitClosed(t, endedAll, "Await, for x's action ended")
	require.False(t, boardtest.Closed(endedY), "y's outcome waiter woken for x's action")

	forX = n.Claimable("x")
	tell(engine.Event{Kind: engine.Claimable, Key: wakeup.ForRecipient("")})
	boardtest.WaitClosed(t, forX, "x's waiter, for an action for anyone")
	boardtest.WaitClosed(t, forY, "y's waiter, for an action for anyone")
}

// Next across Boards wakes for an action addressed to its agent name or
// its identity, and a waiter of another agent sleeps on.
func TestBoard_WakeForAgentAcrossBoards(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	hook, sleeping := sleepSignal()
	bystander := make(chan struct{}, 16) // one per sleep of the bystander
	waiter := openTest(t, path, &Options{SafetyPoll: 10 * time.Second, beforeSleep: hook})
	other := openTest(t, path, &Options{SafetyPoll: 10 * time.Second, beforeSleep: func() { bystander <- struct{}{} }})
	poster := openTest(t, path, nil)
	who, idle := mint(t, "w"), mint(t, "idle")

	idleDone := make(chan error, 1)
	go func() {
		_, err := other.Next(t.Context(), idle, "", 20*time.Second)
		idleDone <- err
	}()
	<-bystander

	for _, to := range []string{"w", string(who)} {
		ch := make(chan actions.Page, 1)
		go func() {
			p, err := waiter.Next(t.Context(), who, "", 8*time.Second)
			if err != nil {
				t.Error(err)
			}
			ch <- p
		}()
		<-sleeping
		start := time.Now()
		a := post(t, poster, "user:alice", to, "for "+to)
		p := <-ch
		require.Len(t, p.Records, 1, to)
		require.Equal(t, a.ID, p.Records[0].ID)
		require.Less(t, time.Since(start), 2*time.Second, "%s: woken by the notifier, not the 10 s safety poll", to)
	}
	// An action for anyone wakes the bystander, which claims it. Had a post
	// for w woken it, it would have looked, found nothing and slept again
	// (before returning, so before idleDone).
	a := post(t, poster, "user:alice", "", "for anyone")
	require.NoError(t, <-idleDone)
	got, err := poster.Get(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, string(idle), got.Holder)
	require.Zero(t, len(bystander), "the bystander slept through the posts for w")
}
