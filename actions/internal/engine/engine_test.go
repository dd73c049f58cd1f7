package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
)

// fakeStore is a Store whose methods a test sets; one it does not set
// panics (the nil Store it embeds), so a test fails loudly when the engine
// asks for what the test did not expect.
type fakeStore struct {
	Store
	alive   map[string]bool
	members []MemberLife
	tx      *fakeTx
	told    []Event
	commit  error // what Write returns after running fn
}

func (s *fakeStore) Closed() error { return nil }
func (s *fakeStore) Cursors() position.Cursors {
	return position.Cursors{ID: "b0000001", Where: "test"}
}
func (s *fakeStore) Tell(e Event)    { s.told = append(s.told, e) }
func (s *fakeStore) Shutdown() error { return nil }
func (s *fakeStore) Processes(context.Context) ([]Process, error) {
	return nil, nil
}

func (s *fakeStore) Alive(_ context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if live, ok := s.alive[id]; ok {
			out[id] = live
		}
	}
	return out, nil
}

func (s *fakeStore) AgentMembers(context.Context, string) ([]MemberLife, error) {
	return s.members, nil
}

func (s *fakeStore) Write(_ context.Context, _ string, fn func(Tx) error) error {
	if err := fn(s.tx); err != nil {
		return err
	}
	return s.commit
}

// fakeTx is a Tx whose Depart and Notify a test watches.
type fakeTx struct {
	Tx
	notified    []Event
	released    []string
	readdressed []string
}

func (t *fakeTx) Notify(e Event) error { t.notified = append(t.notified, e); return nil }

func (t *fakeTx) Depart(identity.ID) ([]string, []string, error) {
	return t.released, t.readdressed, nil
}

func newTest(t *testing.T, s *fakeStore) *Engine {
	t.Helper()
	set, err := Settings{}.Filled(Defaults{Lease: time.Minute, SafetyPoll: time.Minute, PageSize: 10})
	require.NoError(t, err)
	life := NewLife()
	t.Cleanup(func() { _ = life.Close(func() error { return nil }) })
	return New(Config{Settings: set, Log: set.Logger, Life: life, Hub: NewHub(nil, false), OnceBound: time.Second}, s)
}

func mint(t *testing.T, agent string) identity.ID {
	t.Helper()
	id, err := identity.Mint(agent)
	require.NoError(t, err)
	return id
}

func TestEngine_MarkGone(t *testing.T) {
	live, dead := mint(t, "live"), mint(t, "dead")
	e := newTest(t, &fakeStore{alive: map[string]bool{string(live): true, string(dead): false}})
	recs := []actions.Record{
		{ID: "a-1", State: actions.Claimed, Holder: string(live)},
		{ID: "a-2", State: actions.Claimed, Holder: string(dead)},
		{ID: "a-3", State: actions.Claimed, Holder: "agent:gone#00000000"},
		{ID: "a-4", State: actions.Done, Holder: string(dead)},
	}
	e.markGone(t.Context(), recs)
	require.False(t, recs[0].HolderGone, "a live holder")
	require.True(t, recs[1].HolderGone, "a holder whose process died")
	require.True(t, recs[2].HolderGone, "a holder without a member row")
	require.False(t, recs[3].HolderGone, "an ended action has no holder to lose")
}

func TestEngine_CheckLive(t *testing.T) {
	old, cur := mint(t, "w"), mint(t, "w")
	s := &fakeStore{members: []MemberLife{{ID: string(old), Departed: true}, {ID: string(cur), Live: true}}}
	e := newTest(t, s)
	require.NoError(t, e.checkLive(t.Context(), ""), "anyone")
	require.NoError(t, e.checkLive(t.Context(), "w"), "an agent name")
	require.NoError(t, e.checkLive(t.Context(), string(cur)))

	err := e.checkLive(t.Context(), string(old))
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, "departed")
	require.ErrorContains(t, err, string(cur), "names the agent's live identities")

	err = e.checkLive(t.Context(), string(mint(t, "w")))
	require.ErrorIs(t, err, actions.ErrNotLive)
	require.ErrorContains(t, err, "never joined")
}

// A transaction's events reach the store's inside it once each, and the
// local waiters and the other processes only once it has committed.
func TestEngine_EventsFireAfterTheCommit(t *testing.T) {
	tx := &fakeTx{released: []string{"a-1"}}
	s := &fakeStore{tx: tx}
	e := newTest(t, s)
	woken := e.cfg.Hub.Claimable("x")
	who := mint(t, "w")

	s.commit = errors.New("commit lost")
	err := e.write(t.Context(), "depart", func(t *txn) error {
		_, _, err := e.departTx(t, who)
		return err
	})
	require.Error(t, err)
	require.Len(t, tx.notified, 1, "queued in the transaction")
	require.False(t, wakeup.Closed(woken), "no wake-up for a write that did not commit")
	require.Empty(t, s.told)

	s.commit, tx.notified = nil, nil
	require.NoError(t, e.write(t.Context(), "depart", func(t *txn) error {
		for range 2 {
			if _, _, err := e.departTx(t, who); err != nil {
				return err
			}
		}
		return nil
	}))
	everyone := Event{Claimable, wakeup.Everyone}
	require.Equal(t, []Event{everyone}, tx.notified, "one notification for the same event")
	require.Equal(t, []Event{everyone}, s.told)
	require.True(t, wakeup.Closed(woken), "x's waiters woken for work for everyone")
}

// A departure that gave nothing back wakes nobody.
func TestEngine_DepartWakesOnlyWhenSomethingWentBack(t *testing.T) {
	tx := &fakeTx{}
	s := &fakeStore{tx: tx}
	e := newTest(t, s)
	who := mint(t, "w")
	require.NoError(t, e.write(t.Context(), "depart", func(t *txn) error {
		_, _, err := e.departTx(t, who)
		return err
	}))
	require.Empty(t, tx.notified)
	require.Empty(t, s.told)
}

// What an error says of an id or a cursor a caller gave is bounded, however
// large it is (issue 20).
func TestEngine_ErrorsQuoteWithinBounds(t *testing.T) {
	e := newTest(t, &fakeStore{})
	huge := strings.Repeat("x", 100_000)
	who := mint(t, "w")
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := e.Get(t.Context(), huge); return err },
		"finish": func() error { _, err := e.Finish(t.Context(), who, huge, ""); return err },
		"cancel": func() error { _, err := e.Cancel(t.Context(), actions.Agent(who), huge, ""); return err },
		"await": func() error {
			_, err := e.Await(t.Context(), actions.Agent(who), []string{huge}, time.Second)
			return err
		},
		"next": func() error {
			_, err := e.Next(t.Context(), who, actions.Cursor(huge), time.Second)
			return err
		},
		"changes": func() error { _, err := e.Changes(t.Context(), actions.Cursor(huge), time.Second); return err },
	} {
		err := call()
		require.Error(t, err, name)
		require.Less(t, len(err.Error()), 500, "%s: %.200s", name, err.Error())
		require.Contains(t, err.Error(), "bytes more", name)
	}
}

func TestSettings_Filled(t *testing.T) {
	d := Defaults{Lease: time.Minute, SafetyPoll: 10 * time.Second, PageSize: 100}
	s, err := Settings{}.Filled(d)
	require.NoError(t, err)
	require.Equal(t, time.Minute, s.Lease)
	require.Equal(t, 20*time.Second, s.Renew, "a third of the lease")
	require.Equal(t, 10*time.Second, s.SafetyPoll)
	require.Equal(t, 100, s.PageSize)
	require.NotNil(t, s.Logger)
	require.NotNil(t, s.Clock)

	_, err = Settings{Lease: time.Second, Renew: 600 * time.Millisecond}.Filled(d)
	require.ErrorContains(t, err, "at most half the lease")
}

func TestLife_CloseOnceAndNoGoAfter(t *testing.T) {
	l := NewLife()
	ended := make(chan struct{})
	require.True(t, l.Go(func() { <-l.Context().Done(); close(ended) }))
	calls := 0
	boom := errors.New("boom")
	shutdown := func() error {
		calls++
		l.Wait()
		return boom
	}
	require.ErrorIs(t, l.Close(shutdown), boom)
	require.ErrorIs(t, l.Close(shutdown), boom, "later calls return the first result")
	require.Equal(t, 1, calls)
	<-ended
	require.False(t, l.Go(func() {}), "no goroutine starts once Close has waited")
}

func TestHub_WakesWhomAnEventConcerns(t *testing.T) {
	heard := []Event{}
	h := NewHub(func(e Event) { heard = append(heard, e) }, false)
	forX, forY, endedX, every := h.Claimable("x"), h.Claimable("y"), h.Ended("x"), h.EveryEnd()
	require.Equal(t, []Event{{Claimable, "x"}, {Claimable, "y"}, {Ended, "x"}, {Ended, wakeup.Everyone}}, heard, "the transport hears before a waiter takes its channel")

	h.Fire(Event{Claimable, "x"})
	require.True(t, wakeup.Closed(forX))
	require.False(t, wakeup.Closed(forY))
	require.False(t, wakeup.Closed(every), "work is not an end")

	h.Fire(Event{Ended, wakeup.People})
	require.True(t, wakeup.Closed(every))
	require.False(t, wakeup.Closed(endedX), "a person's action is not x's")

	changes := h.Changes()
	h.FireAll()
	require.True(t, wakeup.Closed(forY))
	require.True(t, wakeup.Closed(endedX))
	require.True(t, wakeup.Closed(changes))
}

// A transport that carries every end only as a change (PostgreSQL's)
// wakes the waiters for every end at each change.
func TestHub_EndsOnChange(t *testing.T) {
	h := NewHub(nil, true)
	every := h.EveryEnd()
	h.Fire(Event{Kind: Changed})
	require.True(t, wakeup.Closed(every))

	h = NewHub(nil, false)
	every = h.EveryEnd()
	h.Fire(Event{Kind: Changed})
	require.False(t, wakeup.Closed(every), "a claim is not an end")
}

func TestTablesOf(t *testing.T) {
	for _, tc := range []struct {
		states []actions.State
		want   Tables
	}{
		{nil, BothTables},
		{[]actions.State{actions.Open, actions.Blocked, actions.Claimed}, LiveTable},
		{[]actions.State{actions.Done, actions.Failed, actions.Cancelled}, EndedTable},
		{[]actions.State{actions.Cancelled}, EndedTable},
		{[]actions.State{actions.Open, actions.Done}, BothTables},
	} {
		require.Equal(t, tc.want, TablesOf(tc.states), "%v", tc.states)
	}
}
