package boardtest

import (
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
)

// A ManualClock is an actions.Clock that moves only when a test advances
// it, so lease tests need not sleep through leases. Give the same one to
// every Board of a test's board.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*manualTimer]bool // pending
	changed chan struct{}         // closed when a timer is made or stopped
}

var _ actions.Clock = (*ManualClock)(nil)

// NewManualClock returns a ManualClock at the wall clock's now, so that
// times other processes wrote stay sensible beside it, cut to a whole
// second in UTC, so that the times a board stores (in milliseconds or
// microseconds) come back equal.
func NewManualClock() *ManualClock {
	return &ManualClock{now: time.Now().UTC().Truncate(time.Second), timers: map[*manualTimer]bool{}, changed: make(chan struct{})}
}

// Now implements actions.Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements actions.Clock. A timer of d <= 0 has fired already.
func (c *ManualClock) NewTimer(d time.Duration) actions.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = true
	c.poke()
	return t
}

// poke tells BlockUntil the pending timers changed. c.mu must be held.
func (c *ManualClock) poke() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock by d and fires the timers due by then.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now
		}
	}
	c.poke()
}

// Pending returns how many timers wait to fire.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until at least n timers are pending (the goroutines
// the test drives have armed their next timer), failing the test after
// 10 s (a bound, stretched by testtime.Factor).
func (c *ManualClock) BlockUntil(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.After(testtime.Bound(10 * time.Second))
	for {
		c.mu.Lock()
		pending, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if pending >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("%d timers pending after %v, want %d", pending, testtime.Bound(10*time.Second), n)
		}
	}
}

type manualTimer struct {
	c  *ManualClock
	at time.Time
	ch chan time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	pending := t.c.timers[t]
	delete(t.c.timers, t)
	t.c.poke()
	return pending
}
