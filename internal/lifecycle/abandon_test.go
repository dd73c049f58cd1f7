package lifecycle

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/testio"
	"github.com/tractat-us/bee/internal/testtime"
)

// A bridge that ends right after it starts, while its join waits for a
// board busy with another process's write, leaves no member behind: its
// setup is abandoned, and says so, rather than joining after the bridge
// has gone and looking live for a whole lease.
func TestRun_EndsBeforeItsSessionIsSetUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	// Another process's write in progress: the board's write lock, held.
	lock, err := os.OpenFile(path+"-lock", os.O_RDWR, 0)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_EX))

	logs := &testio.Buffer{}
	before := goleak.IgnoreCurrent()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{
			Agent:     "ghost",
			BoardPath: path,
			RunDir:    filepath.Join(dir, "run"),
			Stdin:     strings.NewReader(""), // the client is gone at once
			Stdout:    io.Discard,
			Logger:    slogTo(logs),
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatalf("Run did not return\nlog:\n%s", logs)
	}
	// The other write ends; the setup, abandoned, ends without joining
	// (every goroutine Run started is gone).
	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_UN))
	require.NoError(t, testtime.FindLeaks(before), "the session setup ended\nlog:\n%s", logs)
	b, err = board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	members, err := b.Members(t.Context())
	require.NoError(t, err)
	require.Empty(t, members, "no live-looking member\nlog:\n%s", logs)
}
