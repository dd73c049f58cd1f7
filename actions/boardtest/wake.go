package boardtest

import (
	"testing"
	"time"

	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/testtime"
)

// Closed reports whether ch is closed now, without waiting.
func Closed(ch <-chan struct{}) bool { return wakeup.Closed(ch) }

// WaitClosed fails the test unless ch closes within a generous bound (10
// s, stretched by testtime.Factor); what names the waiter woken.
func WaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatalf("%s: not woken within %v", what, testtime.Bound(10*time.Second))
	}
}
