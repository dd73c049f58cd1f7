package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// TestSettle_LowersTheGCTargetAfterTheNextCollection: settle leaves Go's
// target alone until the runtime collects, then lowers it to gcPercent.
func TestSettle_LowersTheGCTargetAfterTheNextCollection(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	runtime.GC() // so that none starts on its own in the next lines

	settle(false)
	require.Equal(t, 100, debug.SetGCPercent(100), "lowered before any collection")
	runtime.GC()
	require.Eventually(t, func() bool {
		p := debug.SetGCPercent(-1) // read: SetGCPercent returns the old target
		debug.SetGCPercent(p)
		return p == gcPercent
	}, testtime.Bound(2*time.Second), time.Millisecond)
}

// TestSettle_GOGCSetKeepsItsTarget: with $GOGC set, settle changes nothing.
func TestSettle_GOGCSetKeepsItsTarget(t *testing.T) {
	before := debug.SetGCPercent(80)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	settle(true)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // a cleanup would have run by now
	require.Equal(t, 80, debug.SetGCPercent(80))
}
