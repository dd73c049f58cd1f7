package board

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
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

// An event for people is told in "every" only: no waiter waits in
// people's own folder, which is never made.
func TestNotifier_PeopleOnlyInEvery(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	writer := openTest(t, path, nil)
	reader := openTest(t, path, nil)
	endedAll := reader.hub.EveryEnd()
	writer.notify.tell(engine.Event{Kind: engine.Ended, Key: wakeup.ForPoster("user:alice")})
	boardtest.WaitClosed(t, endedAll, "Await, for a person's action ended")
	_, err := os.Stat(filepath.Join(writer.notify.dir, keyDir(wakeup.People)))
	require.ErrorIs(t, err, os.ErrNotExist, "people's folder touched")
	_, err = os.Stat(filepath.Join(writer.notify.dir, everyDir, endedFile+"-"+wakeup.People))
	require.NoError(t, err)
}

// Next across Boards wakes for an action addressed to its agent name or
// its identity, and a waiter of another agent sleeps on.
func TestBoard_WakeForAgentAcrossBoards(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	hook, sleeping := sleepSignal()
	bystander := make(chan struct{}, 16) // one per sleep of the bystander
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	poll := testtime.Bound(10 * time.Second)
	waiter := openTest(t, path, &Options{SafetyPoll: poll, beforeSleep: hook})
	other := openTest(t, path, &Options{SafetyPoll: poll, beforeSleep: func() { bystander <- struct{}{} }})
	poster := openTest(t, path, nil)
	who, idle := mint(t, "w"), mint(t, "idle")

	idleDone := make(chan error, 1)
	go func() {
		_, err := other.Next(t.Context(), idle, "", testtime.Bound(20*time.Second))
		idleDone <- err
	}()
	<-bystander

	for _, to := range []string{"w", string(who)} {
		ch := make(chan actions.Page, 1)
		go func() {
			p, err := waiter.Next(t.Context(), who, "", testtime.Bound(8*time.Second))
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
		require.Less(t, time.Since(start), testtime.Bound(2*time.Second), "%s: woken by the notifier, not the 10 s safety poll", to)
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

func init() {
	moreRoles["bystander"] = roleBystander
	roleOptions["bystander"] = func(o *Options, out *boardtest.Out) {
		o.SafetyPoll = time.Hour // only the notifier wakes it
		o.beforeSleep = func() { out.Say("sleeping") }
	}
}

// roleBystander joins an identity of agent boardtest.EnvAgent and waits
// for work in Next until its stdin closes, reporting "got <id>" per claim,
// which it finishes, and "sleeping" before each sleep; at each line
// "heard" it reports "heard <n>": how many events its Board's notify
// watcher has received.
func roleBystander(ctx context.Context, b *Board, out *boardtest.Out, cmds <-chan string) error {
	who, err := identity.Mint(os.Getenv(boardtest.EnvAgent))
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	defer b.Depart(context.WithoutCancel(ctx), who)
	errs := make(chan error, 1)
	go func() {
		errs <- func() error {
			for {
				p, err := b.Next(ctx, who, "", time.Hour)
				if ctx.Err() != nil {
					return nil
				}
				if err != nil {
					return err
				}
				for _, r := range p.Records {
					out.Say("got %s", r.ID)
					if _, err := b.Finish(ctx, who, r.ID, ""); err != nil && ctx.Err() == nil {
						return err
					}
				}
			}
		}()
	}()
	for cmd := range cmds {
		if cmd != "heard" {
			return fmt.Errorf("unknown command %q", cmd)
		}
		out.Say("heard %d", b.notify.heard.Load())
	}
	return <-errs
}

// A post addressed to one agent, its claim and its end wake no other
// process: of two bridges waiting on the board, each of its own agent,
// the other one's watcher receives nothing at all. A process's notify
// watcher reads its events in order, so once a later touch it hears has
// reached it, an earlier one would have too.
func TestNotifier_PostForOneAgentLeavesOthersAsleep(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	poster := openTest(t, path, nil)
	a := boardtest.StartProc(t, "bystander", path, boardtest.EnvAgent+"=a")
	b := boardtest.StartProc(t, "bystander", path, boardtest.EnvAgent+"=b")
	a.Expect("sleeping", testtime.Bound(30*time.Second))
	b.Expect("sleeping", testtime.Bound(30*time.Second))
	postTo := func(p *boardtest.Proc, to string) {
		t.Helper()
		r := post(t, poster, "user:alice", to, "for "+to)
		p.Expect("got "+r.ID, testtime.Bound(10*time.Second))
		p.Expect("sleeping", testtime.Bound(10*time.Second))
	}
	heard := func() int {
		t.Helper()
		b.Send("heard")
		n, err := strconv.Atoi(strings.TrimPrefix(b.Expect("heard ", testtime.Bound(10*time.Second)), "heard "))
		require.NoError(t, err)
		return n
	}
	// The first post to each makes the folders and files its touches use.
	postTo(a, "a")
	postTo(b, "b")

	before := heard()
	for range 5 {
		postTo(a, "a")
	}
	postTo(b, "b")
	withA := heard() - before
	postTo(b, "b")
	alone := heard() - before - withA
	require.Positive(t, alone, "b heard the post for b")
	require.Equal(t, alone, withA, "b's watcher received events of the posts for a")
	a.Finish(testtime.Bound(30 * time.Second))
	b.Finish(testtime.Bound(30 * time.Second))
}

// A Board hears the files an older bee touches at the top of the notify
// directory, one agent's included.
func TestNotifier_HearsOlderBees(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	reader := openTest(t, path, nil)
	h := reader.hub
	forX, forY, endedX := h.Claimable("x"), h.Claimable("y"), h.Ended("x")
	require.NoError(t, touchFile(filepath.Join(path+"-notify", "wake-x")))
	boardtest.WaitClosed(t, forX, "x's waiter, for an older bee's wake-x")
	require.NoError(t, touchFile(filepath.Join(path+"-notify", "ended-x")))
	boardtest.WaitClosed(t, endedX, "x's outcome waiter, for an older bee's ended-x")
	require.False(t, boardtest.Closed(forY), "y's waiter woken for x")
	forY = h.Claimable("y")
	require.NoError(t, touchFile(filepath.Join(path+"-notify", wakeFile)))
	boardtest.WaitClosed(t, forY, "y's waiter, for an action for anyone")
}

// A key's folder, or the "every" folder, removed or renamed away wakes
// its waiters (a touch may have been missed), and is watched again once
// a writer's touch makes it; so is the whole directory removed.
func TestNotifier_FoldersSurviveRemoval(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "board.db")
	writer := openTest(t, path, nil)
	reader := openTest(t, path, nil)
	h, tell, dir := reader.hub, writer.notify.tell, path+"-notify"
	forX, change := h.Claimable("x"), h.Changes()
	hears := func(what string) {
		t.Helper()
		forX, change = h.Claimable("x"), h.Changes()
		tell(engine.Event{Kind: engine.Claimable, Key: "x"})
		boardtest.WaitClosed(t, forX, what+": x's waiter, for x's action")
		boardtest.WaitClosed(t, change, what+": Changes, for x's action")
	}
	hears("at first")

	forX, change = h.Claimable("x"), h.Changes()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, keyDir("x"))))
	boardtest.WaitClosed(t, forX, "x's waiter, for x's folder removed")
	hears("x's folder removed")

	forX, change = h.Claimable("x"), h.Changes()
	require.NoError(t, os.Rename(filepath.Join(dir, keyDir("x")), filepath.Join(t.TempDir(), "away")))
	boardtest.WaitClosed(t, forX, "x's waiter, for x's folder renamed away")
	hears("x's folder renamed away")

	forX, change = h.Claimable("x"), h.Changes()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, everyDir)))
	boardtest.WaitClosed(t, change, "Changes, for the every folder removed")
	hears("every folder removed")

	forX, change = h.Claimable("x"), h.Changes()
	require.NoError(t, os.RemoveAll(dir), "no watcher makes a folder again as the directory goes")
	boardtest.WaitClosed(t, forX, "x's waiter, for the directory removed")
	hears("directory removed")
}
