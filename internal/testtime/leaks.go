package testtime

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakBound is how long, nominally, goroutines a test ended get to return.
// goleak waits only about 0.4 s of its own, a bound that fails on a busy
// machine.
const leakBound = 5 * time.Second

// FindLeaks returns goleak's error for goroutines beyond opts that are
// still running once Bound(5 s) has passed, or nil as soon as there are
// none. It is goleak.Find with a scaled wait.
func FindLeaks(opts ...goleak.Option) error { return findLeaks(Bound(leakBound), opts...) }

func findLeaks(bound time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(bound)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// VerifyNoLeaks fails tb when FindLeaks finds goroutines: goleak.VerifyNone
// with a scaled wait.
func VerifyNoLeaks(tb testing.TB, opts ...goleak.Option) {
	tb.Helper()
	if err := FindLeaks(opts...); err != nil {
		tb.Error(err)
	}
}

// VerifyTestMain runs m's tests and, when they pass, fails the binary if
// FindLeaks finds goroutines; then it exits with the outcome: goleak's
// VerifyTestMain with a stretched wait. Call it from TestMain.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := FindLeaks(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left running after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}
