package board

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// watchEvents runs w until the test ends and returns its events.
func watchEvents(t *testing.T, w *dirWatch) <-chan dirEvent {
	t.Helper()
	events := make(chan dirEvent, 256)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.run(func(ev dirEvent) { events <- ev })
	}()
	t.Cleanup(func() {
		require.NoError(t, w.close())
		<-ended
	})
	return events
}

// nextEvent waits for an event of name that has op, passing over others,
// and fails the test when none comes within its bound.
func nextEvent(t *testing.T, events <-chan dirEvent, name string, op dirOp) {
	t.Helper()
	deadline := time.After(testtime.Bound(2 * time.Second))
	for {
		select {
		case ev := <-events:
			require.NoError(t, ev.err)
			if ev.name == name && ev.has(op) {
				return
			}
		case <-deadline:
			t.Fatalf("no event %v of %s", op, name)
		}
	}
}

// watchedFolder is a notify directory and a folder in it, both watched,
// and the watch's events.
func watchedFolder(t *testing.T) (dir, folder string, w *dirWatch, events <-chan dirEvent) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "notify")
	folder = filepath.Join(dir, "for-bob")
	require.NoError(t, os.MkdirAll(folder, 0o700))
	w, err := newDirWatch()
	require.NoError(t, err)
	require.NoError(t, w.add(dir))
	require.NoError(t, w.add(folder))
	return dir, folder, w, watchEvents(t, w)
}

// TestDirWatch_Events: a file touched in any watched directory comes with
// its path; a watched folder removed or moved away is reported by its
// parent, and once made and added again reports again; the top directory
// removed is reported as removed.
func TestDirWatch_Events(t *testing.T) {
	t.Parallel()
	dir, folder, w, events := watchedFolder(t)

	require.NoError(t, touchFile(filepath.Join(dir, "wake")))
	nextEvent(t, events, filepath.Join(dir, "wake"), opCreate)
	require.NoError(t, touchFile(filepath.Join(folder, "ended")))
	nextEvent(t, events, filepath.Join(folder, "ended"), opCreate)
	require.NoError(t, touchFile(filepath.Join(folder, "ended")))
	nextEvent(t, events, filepath.Join(folder, "ended"), opWrite)

	require.NoError(t, os.RemoveAll(folder))
	nextEvent(t, events, folder, opRemove)
	require.NoError(t, os.Mkdir(folder, 0o700))
	nextEvent(t, events, folder, opCreate)
	require.NoError(t, w.add(folder))
	require.NoError(t, touchFile(filepath.Join(folder, "wake")))
	nextEvent(t, events, filepath.Join(folder, "wake"), opCreate)

	away := filepath.Join(t.TempDir(), "away")
	require.NoError(t, os.Rename(folder, away))
	nextEvent(t, events, folder, opRename)
	require.NoError(t, os.Mkdir(folder, 0o700))
	require.NoError(t, w.add(folder))
	require.NoError(t, touchFile(filepath.Join(away, "moved-away")))
	require.NoError(t, touchFile(filepath.Join(folder, "again")))
	nextEvent(t, events, filepath.Join(folder, "again"), opCreate)

	require.NoError(t, os.RemoveAll(dir))
	nextEvent(t, events, dir, opRemove)
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, w.add(dir))
	require.NoError(t, touchFile(filepath.Join(dir, "change")))
	nextEvent(t, events, filepath.Join(dir, "change"), opCreate)
}

// TestDirWatch_MovedAwayIsForgotten: a folder moved away is no longer
// watched under its old path: what happens in it where it went is not
// reported as if it were still there.
func TestDirWatch_MovedAwayIsForgotten(t *testing.T) {
	t.Parallel()
	dir, folder, _, events := watchedFolder(t)

	away := filepath.Join(t.TempDir(), "away")
	require.NoError(t, os.Rename(folder, away))
	nextEvent(t, events, folder, opRename)
	require.NoError(t, touchFile(filepath.Join(away, "wake")))
	require.NoError(t, touchFile(filepath.Join(dir, "marker")))
	// Events come in order, so the marker's comes after any of the moved
	// folder's.
	deadline := time.After(testtime.Bound(2 * time.Second))
	for {
		select {
		case ev := <-events:
			require.NotEqual(t, filepath.Join(folder, "wake"), ev.name, "a moved folder's file reported under its old path")
			if ev.name == filepath.Join(dir, "marker") {
				return
			}
		case <-deadline:
			t.Fatal("no event of the marker")
		}
	}
}

// TestDirWatch_AddMissing: watching a directory that does not exist fails
// with an error that says so, as the notifier expects of a folder not yet
// made.
func TestDirWatch_AddMissing(t *testing.T) {
	t.Parallel()
	w, err := newDirWatch()
	require.NoError(t, err)
	defer w.close()
	require.ErrorIs(t, w.add(filepath.Join(t.TempDir(), "missing")), os.ErrNotExist)
}

// TestDirWatch_CloseEndsAWaitingRun: close ends run while it waits for an
// event, so that a Board's close is not left waiting for its notifier;
// close may be called again.
func TestDirWatch_CloseEndsAWaitingRun(t *testing.T) {
	t.Parallel()
	w, err := newDirWatch()
	require.NoError(t, err)
	require.NoError(t, w.add(t.TempDir()))
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
	require.NoError(t, w.close())
}
