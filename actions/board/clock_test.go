package board

import (
	"sync"
	"testing"
	"time"
)

// A manualClock is a Clock that moves only when a test advances it, so
// lease tests need not sleep through leases.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*manualTimer]bool // pending
	changed chan struct{}         // closed when a timer is made or stopped
}

func newManualClock() *manualClock {
	// The wall clock's now: lease ends other processes wrote stay sensible.
	return &manualClock{now: time.Now(), timers: map[*manualTimer]bool{}, changed: make(chan struct{})}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) Timer {
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
func (c *manualClock) poke() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock by d and fires the timers due by then.
func (c *manualClock) Advance(d time.Duration) {
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

// BlockUntil waits until n timers are pending (the goroutines the test
// drives have armed their next timer), failing the test after 10 s.
func (c *manualClock) BlockUntil(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		pending, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if pending == n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d timers pending after 10 s, want %d", pending, n)
		}
	}
}

type manualTimer struct {
	c  *manualClock
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
