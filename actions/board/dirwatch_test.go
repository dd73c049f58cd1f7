package board

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// TestDirWatch_Events: a touched file is reported by its base name, the
// directory's removal as gone, and the directory made again and watched
// again is reported again.
func TestDirWatch_Events(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notify")
	require.NoError(t, os.Mkdir(dir, 0o700))
	w, err := newDirWatch(dir)
	require.NoError(t, err)
	events := make(chan dirEvent, 64)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.run(func(ev dirEvent) { events <- ev })
	}()
	next := func(want func(dirEvent) bool) {
		t.Helper()
		deadline := time.After(testtime.Bound(2 * time.Second))
		for {
			select {
			case ev := <-events:
				if want(ev) {
					return
				}
			case <-deadline:
				t.Fatal("no such event")
			}
		}
	}
	require.NoError(t, touchFile(filepath.Join(dir, "wake-bob")))
	next(func(ev dirEvent) bool { return ev.name == "wake-bob" })
	require.NoError(t, os.Remove(filepath.Join(dir, "wake-bob")))
	require.NoError(t, os.Remove(dir))
	next(func(ev dirEvent) bool { return ev.gone })
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, w.add())
	require.NoError(t, touchFile(filepath.Join(dir, "ended")))
	next(func(ev dirEvent) bool { return ev.name == "ended" })

	require.NoError(t, w.close())
	<-ended
}

// TestDirWatch_CloseEndsAWaitingRun: close ends run while it waits for an
// event, so that a Board's close is not left waiting for its notifier.
func TestDirWatch_CloseEndsAWaitingRun(t *testing.T) {
	w, err := newDirWatch(t.TempDir())
	require.NoError(t, err)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.run(func(dirEvent) {})
	}()
	time.Sleep(50 * time.Millisecond) // run is waiting in its read by now
	require.NoError(t, w.close())
	select {
	case <-ended:
	case <-time.After(testtime.Bound(2 * time.Second)):
		t.Fatal("run did not end at close")
	}
}
