package pgboard

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// listeners is how many of the server's backends LISTEN on the board's
// database: the connections whose last statement was a LISTEN.
func listeners(t *testing.T, b *Board) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n))
	return n
}

// startWaiters starts a waiter process per agent on url (with env), each
// asleep in Next once it returns.
func startWaiters(t *testing.T, url string, agents []string, env ...string) map[string]*boardtest.Proc {
	t.Helper()
	procs := map[string]*boardtest.Proc{}
	for _, a := range agents {
		procs[a] = boardtest.StartProc(t, "waiter", url, append([]string{boardtest.EnvAgent + "=" + a}, env...)...)
		procs[a].Expect("sleeping", testtime.Bound(30*time.Second))
	}
	return procs
}

// relayed opens a Board that listens on its own connection (to post) on
// a new database, and starts the first Board of the machine there, in a
// waiter process for agent "r": the machine's listener.
func relayed(t *testing.T) (b *Board, url string, relay *boardtest.Proc) {
	t.Helper()
	c := pgtest.Shared(t)
	url = c.URL(c.NewDB(t))
	b = openTest(t, url, &Options{OwnListener: true})
	return b, url, startWaiters(t, url, []string{"r"})["r"]
}

// postTo posts an action to agent and waits for its waiter to say it got
// it, well before the waiters' 30 s safety poll.
func postTo(t *testing.T, b *Board, w *boardtest.Proc, agent string, within time.Duration) {
	t.Helper()
	r, err := b.Post(t.Context(), "user:alice", actions.Draft{To: agent, Title: "job"})
	require.NoError(t, err)
	w.Expect("got "+r.ID+" ", within)
	w.Expect("sleeping", testtime.Bound(10*time.Second))
}

// The Boards of one machine LISTEN through one connection: the machine's
// listener, which hands each of them the notifications it asked for; with
// the listener off, each Board has its own.
func TestRelay_OneListenerPerMachine(t *testing.T) {
	t.Parallel()
	agents := []string{"a0", "a1", "a2"}
	for _, tc := range []struct {
		name string
		own  bool
		want int
	}{{"machine", false, 1}, {"own", true, len(agents) + 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := pgtest.Shared(t)
			url := c.URL(c.NewDB(t))
			b := listening(t, openTest(t, url, &Options{OwnListener: tc.own})).b
			env := []string{EnvListener + "=machine"}
			if tc.own {
				env = []string{EnvListener + "=own"}
			}
			waiters := startWaiters(t, url, agents, env...)
			for _, a := range agents {
				postTo(t, b, waiters[a], a, testtime.Bound(10*time.Second))
			}
			require.Equal(t, tc.want, listeners(t, b), "listening connections")
			for _, w := range waiters {
				w.Finish(testtime.Bound(30 * time.Second))
			}
		})
	}
}

// When the machine's listener's process dies, its followers elect
// another at once, and what is posted then wakes them.
func TestRelay_KilledListenerIsReplaced(t *testing.T) {
	t.Parallel()
	b, url, relay := relayed(t)
	followers := startWaiters(t, url, []string{"f0", "f1"})
	require.Equal(t, 2, listeners(t, b), "this Board's own and the machine's")
	relay.Kill()
	for i, a := range []string{"f0", "f1", "f0"} {
		start := time.Now()
		postTo(t, b, followers[a], a, testtime.Bound(10*time.Second))
		t.Logf("post %d to %s: woken in %v", i, a, time.Since(start))
	}
	require.Eventually(t, func() bool { return listeners(t, b) == 2 }, testtime.Bound(10*time.Second), 50*time.Millisecond,
		"one follower is the machine's listener now")
	for _, w := range followers {
		w.Finish(testtime.Bound(30 * time.Second))
	}
}

// A machine's listener that stops (a bridge stopped with its Claude Code
// by ^Z) delays its followers' wake-ups by relayStall, not by their
// safety poll: they listen on their own connections meanwhile.
func TestRelay_StoppedListener(t *testing.T) {
	t.Parallel()
	b, url, relay := relayed(t)
	f := startWaiters(t, url, []string{"f"})["f"]
	require.NoError(t, syscall.Kill(relay.Pid(), syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(relay.Pid(), syscall.SIGCONT)
		}
	}()
	start := time.Now()
	postTo(t, b, f, "f", testtime.Bound(relayStall+10*time.Second))
	t.Logf("woken in %v with the machine's listener stopped", time.Since(start))
	require.NoError(t, syscall.Kill(relay.Pid(), syscall.SIGCONT))
	stopped = false
	postTo(t, b, f, "f", testtime.Bound(10*time.Second))
	postTo(t, b, relay, "r", testtime.Bound(10*time.Second))
	f.Finish(testtime.Bound(30 * time.Second))
	relay.Finish(testtime.Bound(30 * time.Second))
}

// A Board that closes as the machine's listener leaves no goroutine
// behind, and its follower, in the same process, listens on: what is
// posted after wakes it.
func TestRelay_ListenerClosesFollowerGoesOn(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	poster := openTest(t, url, &Options{OwnListener: true})
	before := goleak.IgnoreCurrent()
	relay, err := Open(url, &Options{})
	require.NoError(t, err)
	listening(t, relay)
	follower := listening(t, openTest(t, url, nil)).b
	require.Equal(t, 2, listeners(t, poster), "the poster's and the machine's")

	who := mint(t, "f")
	type next struct {
		p   actions.Page
		err error
	}
	got := make(chan next, 1)
	go func() {
		p, err := follower.Next(t.Context(), who, "", testtime.Bound(20*time.Second))
		got <- next{p, err}
	}()
	time.Sleep(100 * time.Millisecond) // let it fall asleep
	require.NoError(t, relay.Close())
	require.Eventually(t, func() bool { return listeners(t, poster) == 2 }, testtime.Bound(10*time.Second), 50*time.Millisecond,
		"the follower is the machine's listener now")
	r := post(t, poster, "after the relay closed")
	select {
	case n := <-got:
		require.NoError(t, n.err)
		require.Len(t, n.p.Records, 1)
		require.Equal(t, r.ID, n.p.Records[0].ID)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the follower was not woken")
	}
	require.NoError(t, follower.Close())
	goleak.VerifyNone(t, before)
}

// A follower whose waiter asks for its agent's channel before the machine's
// listener has answered its first asks still has it listened to: the
// follower is up, and wakes its waiters, only once every channel it
// wants is. (The relay is stopped meanwhile, for less than relayStall.)
func TestRelay_ChannelWantedBeforeUp(t *testing.T) {
	t.Parallel()
	b, url, relay := relayed(t)
	require.NoError(t, syscall.Kill(relay.Pid(), syscall.SIGSTOP))
	stopped := time.Now()
	f := boardtest.StartProc(t, "waiter", url, boardtest.EnvAgent+"=f")
	f.Expect("sleeping", testtime.Bound(30*time.Second))
	require.Less(t, time.Since(stopped), relayStall, "the follower asked its relay before it stalled")
	require.NoError(t, syscall.Kill(relay.Pid(), syscall.SIGCONT))
	postTo(t, b, f, "f", testtime.Bound(10*time.Second))
	f.Finish(testtime.Bound(30 * time.Second))
	relay.Finish(testtime.Bound(30 * time.Second))
}

// A listener is up, in each session, only once every channel it wants is
// listened to in that session: a follower that follows a new relay (or a
// relay on a new connection) must not take the channels its last session
// listened to for listened to now, nor tell a follower so.
func TestRelay_UpOnlyOnceAllListenedInThisSession(t *testing.T) {
	t.Parallel()
	b := openTest(t, "", &Options{OwnListener: true})
	l := newListener(b, b.connConfig) // not run: this test drives it
	mine := b.channelFor(engine.Event{Kind: engine.Claimable, Key: "w"})
	l.want(mine) // not up: returns at once
	var all []string
	for name := range l.wanted {
		all = append(all, name)
	}
	l.newSession()
	l.listened(all)
	require.True(t, l.up, "up once every wanted channel is listened to")

	l.mu.Lock()
	l.up = false // the session ended (see listener.run)
	l.mu.Unlock()
	l.newSession()
	live, _ := l.liveFor(mine)
	require.False(t, live, "a channel of the last session is not listened to in this one")
	l.listened([]string{mine})
	require.False(t, l.up, "not up while some wanted channel is not listened to in this session")
	live, _ = l.liveFor(mine)
	require.True(t, live)
	l.listened(all)
	require.True(t, l.up)
}

// A Board that watches every change (bee watch, the board page, Await)
// listens on a connection of its own, never through the machine's
// listener: the watch lock that makes every writer notify the change
// channel is held for as long as that Board lives, and let go with it, not
// kept by a relay that outlives it.
func TestRelay_WatcherListensOnItsOwn(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	relay := listening(t, openTest(t, url, nil)).b
	watcher, err := Open(url, nil)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = watcher.Close()
		}
	}()
	listening(t, watcher)
	watchLocks := func() int {
		var n int
		require.NoError(t, relay.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid::bigint = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			watchLock).Scan(&n))
		return n
	}
	require.Equal(t, 1, listeners(t, relay), "the watcher follows the machine's listener")
	require.Zero(t, watchLocks())

	type page struct {
		p   actions.Page
		err error
	}
	got := make(chan page, 1)
	go func() {
		p, err := watcher.Changes(t.Context(), "", testtime.Bound(20*time.Second))
		got <- page{p, err}
	}()
	require.Eventually(t, func() bool { return listeners(t, relay) == 2 && watchLocks() > 0 }, testtime.Bound(10*time.Second), 20*time.Millisecond,
		"the watcher listens on a connection of its own, with the watch lock")
	r := post(t, relay, "seen by the watcher")
	select {
	case g := <-got:
		require.NoError(t, g.err)
		require.NotEmpty(t, g.p.Records)
		require.Equal(t, r.ID, g.p.Records[len(g.p.Records)-1].ID)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the watcher did not see the post")
	}
	require.NoError(t, watcher.Close())
	closed = true
	require.Eventually(t, func() bool { return listeners(t, relay) == 1 && watchLocks() == 0 }, testtime.Bound(10*time.Second), 20*time.Millisecond,
		"the watch lock is let go with the watcher")
}
