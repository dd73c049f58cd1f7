package actions

import "time"

// A Clock is a board's time, as tls.Config.Time is TLS's: Now for every
// time a board records or compares (posted, claimed and ended times,
// leases, renewals), NewTimer for the waits those times decide (a lease
// running out, the next renewal). The bounds of calls (timeouts, safety
// polls) stay real durations. A test gives a manual clock and advances it
// instead of sleeping through a lease; every Board on one board's storage
// must then share it, since they compare each other's leases.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer whose channel receives once d has passed
	// on this clock.
	NewTimer(d time.Duration) Timer
}

// A Timer is a Clock's one-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// WallClock returns the wall clock with the runtime's timers.
func WallClock() Clock { return wallClock{} }

type wallClock struct{}

func (wallClock) Now() time.Time                 { return time.Now() }
func (wallClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (t wallTimer) C() <-chan time.Time { return t.t.C }
func (t wallTimer) Stop() bool          { return t.t.Stop() }
