package engine

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
)

// claimStore is a store of one agent's queue for Next, which records what
// the engine asks of it, in order: "look", "processes", "claimant",
// "take" and "depart".
type claimStore struct {
	fakeStore
	mu    sync.Mutex
	calls []string
	open  []actions.Record // claimable, oldest first
	procs []Process        // what Processes says: this machine's members
	gone  []actions.Record // what the departure of procs' members puts back
}

func (s *claimStore) call(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
}

// took returns the calls so far and forgets them.
func (s *claimStore) took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *claimStore) Holding(identity.ID, int) {}

func (s *claimStore) Processes(context.Context) ([]Process, error) {
	s.call("processes")
	return s.procs, nil
}

func (s *claimStore) Look(context.Context, Want) (Look, error) {
	s.call("look")
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	return Look{Claimable: len(s.open) > 0, Member: true, Lease: now.Add(time.Minute), Now: now, At: now}, nil
}

// post makes rec claimable.
func (s *claimStore) post(rec actions.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = append(s.open, rec)
}

// claimTx is the store's write transaction: Claimant, Take, and the
// departure of a dead member.
type claimTx struct {
	fakeTx
	s *claimStore
}

func (t *claimTx) Claimant(Want, Look) (Claimant, error) {
	t.s.call("claimant")
	return Claimant{Lease: time.Now().Add(time.Minute)}, nil
}

func (t *claimTx) Take(w Want) (actions.Record, bool, error) {
	t.s.call("take")
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if len(t.s.open) == 0 {
		return actions.Record{}, false, nil
	}
	rec := t.s.open[0]
	t.s.open = t.s.open[1:]
	rec.State, rec.Holder = actions.Claimed, string(w.Who)
	return rec, true, nil
}

func (t *claimTx) StillDead(identity.ID) (bool, error) { return true, nil }

func (t *claimTx) Depart(identity.ID) ([]string, []string, error) {
	t.s.call("depart")
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	var back []string
	for _, rec := range t.s.gone {
		t.s.open = append(t.s.open, rec)
		back = append(back, rec.ID)
	}
	t.s.gone, t.s.procs = nil, nil
	return back, nil, nil
}

// newClaimTest is an engine over a claimStore, with hot claims as the
// file board has them, and its Life; tune, when given, changes its Config.
func newClaimTest(t *testing.T, tune ...func(*Config)) (*Engine, *claimStore, *Life) {
	t.Helper()
	s := &claimStore{}
	s.tx = &fakeTx{}
	set, err := Settings{}.Filled(Defaults{Lease: time.Minute, SafetyPoll: time.Minute, PageSize: 10})
	require.NoError(t, err)
	life := NewLife()
	t.Cleanup(func() { _ = life.Close(func() error { return nil }) })
	c := Config{Settings: set, Log: set.Logger, Life: life, Hub: NewHub(nil, false), OnceBound: time.Second, HotClaims: true}
	for _, f := range tune {
		f(&c)
	}
	return New(c, s), s, life
}

func (s *claimStore) Write(_ context.Context, _ string, fn func(Tx) error) error {
	return fn(&claimTx{s: s})
}

// A post that wakes a waiting Next is claimed before the read of this
// machine's members, which only a look that claimed nothing makes.
func TestEngine_NextClaimsBeforeItReaps(t *testing.T) {
	e, s, _ := newClaimTest(t)
	who := mint(t, "w")
	s.post(actions.Record{ID: "a-1", Seq: 1})
	p, err := e.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, []string{"look", "claimant", "take"}, s.took())

	p, err = e.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Empty(t, p.Records)
	calls := s.took()
	require.Contains(t, calls, "processes", "a look that claimed nothing reaps")
}

// A member whose process died is reaped by a look that found nothing, and
// what it held is claimed in the same call.
func TestEngine_NextClaimsWhatAReapPutsBack(t *testing.T) {
	e, s, _ := newClaimTest(t)
	dead := exec.Command("true")
	require.NoError(t, dead.Run()) // its pid is gone once Run returns
	s.procs = []Process{{ID: mint(t, "dead"), PID: dead.Process.Pid}}
	s.gone = []actions.Record{{ID: "a-1", Seq: 1}}
	p, err := e.Next(t.Context(), mint(t, "w"), "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1, "claimed in the call that reaped: calls %v", s.calls)
	require.Equal(t, "a-1", p.Records[0].ID)
	require.Equal(t, "look processes depart look claimant take", strings.Join(s.took(), " "))
}

// An identity whose claim came from its first look (a queue it drains)
// claims next without looking first; one whose claim came after it slept
// (a post that woke it) looks first, so that its next call does not hold
// the write lock only to find nothing.
func TestEngine_HotOnlyAfterAClaimWithoutSleep(t *testing.T) {
	e, s, _ := newClaimTest(t)
	who := mint(t, "w")
	s.post(actions.Record{ID: "a-1", Seq: 1})
	s.post(actions.Record{ID: "a-2", Seq: 2})
	_, err := e.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	s.took()
	p, err := e.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, []string{"claimant", "take"}, s.took(), "a queue drained without a look")

	// Empty, the queue: the hot claim finds nothing, then the call sleeps
	// until a post wakes it.
	got := make(chan actions.Page, 1)
	go func() {
		p, err := e.Next(t.Context(), who, "", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.calls) > 0 && s.calls[len(s.calls)-1] == "processes"
	}, 10*time.Second, time.Millisecond, "the call looks, finds nothing and sleeps")
	s.post(actions.Record{ID: "a-3", Seq: 3})
	e.cfg.Hub.Fire(Event{Claimable, wakeup.Everyone})
	require.Len(t, (<-got).Records, 1)
	s.took()

	p, err = e.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Empty(t, p.Records)
	calls := s.took()
	require.NotEmpty(t, calls)
	require.Equal(t, "look", calls[0], "a claim that came after a sleep makes nobody hot: %v", calls)
}

// Config.Warm runs once, the first time a call sleeps; a call that does
// not sleep does not run it.
func TestEngine_WarmOnceAtFirstSleep(t *testing.T) {
	var mu sync.Mutex
	warmed := 0
	warm := func() {
		mu.Lock()
		defer mu.Unlock()
		warmed++
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return warmed
	}
	e, _, life := newClaimTest(t, func(c *Config) { c.HotClaims, c.Warm = false, warm })
	who := mint(t, "w")
	_, err := e.Next(t.Context(), who, "", 0) // looks once, never sleeps
	require.NoError(t, err)
	require.Zero(t, count())
	for range 3 {
		_, err = e.Next(t.Context(), who, "", time.Millisecond)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, life.Close(func() error { return nil }), "warm ran in the board's lifetime")
	require.Equal(t, 1, count())
}
