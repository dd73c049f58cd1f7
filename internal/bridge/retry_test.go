package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/testtime"
)

type temporaryErr struct{ error }

func (temporaryErr) Temporary() bool { return true }

// A setup that fails with a temporary error is tried again after a pause
// that doubles from 250 ms up to 5 s; tool calls meanwhile say what it
// waits for, and work once it succeeds.
func TestPending_RetriesTemporaryErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		gate := make(chan struct{})
		p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
			mu.Lock()
			at = append(at, time.Since(start))
			n := len(at)
			mu.Unlock()
			if n <= 7 {
				return nil, fmt.Errorf("open: %w", temporaryErr{errors.New("board /b.db is locked by pid 42 (bee)")})
			}
			<-gate
			return actions.NoActions{}, nil
		})
		cs := connectPending(t, p, nil, nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		ms := time.Millisecond
		mu.Lock()
		require.Equal(t, []time.Duration{0, 250 * ms, 750 * ms, 1750 * ms, 3750 * ms, 7750 * ms, 12750 * ms, 17750 * ms}, at,
			"pauses of 250, 500 ms, 1, 2, 4 s, then 5 s")
		mu.Unlock()
		res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
		require.True(t, res.IsError)
		require.Contains(t, said(t, res), "locked by pid 42 (bee)")
		require.Contains(t, said(t, res), "retrying")
		close(gate)
		res = call(t, cs, ToolWhoami, nil)
		require.False(t, res.IsError, text(res))
	})
}

// Any other error ends the setup at once.
func TestPending_OtherErrorsAreFinal(t *testing.T) {
	var attempts atomic.Int32
	p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
		attempts.Add(1)
		return nil, errors.New("not a database")
	})
	_, err := p.Wait(t.Context())
	require.ErrorContains(t, err, "not a database")
	require.Equal(t, int32(1), attempts.Load())
}

// A bridge started while another process holds the board's lock (stopped,
// say) says who holds it while it retries, and serves once the lock is let
// go.
func TestPending_LockedBoard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	// Hold the board's write lock as another bee process would.
	lock, err := os.OpenFile(path+"-lock", os.O_RDWR, 0)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_EX))
	held := true
	defer func() {
		if held {
			_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		}
	}()

	var src atomic.Pointer[board.Board]
	p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
		b, err := board.Open(path, &board.Options{BusyTimeout: 100 * time.Millisecond})
		if err == nil {
			src.Store(b)
		}
		return b, err
	})
	cs := connectPending(t, p, nil, nil)
	res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
	require.True(t, res.IsError)
	require.Contains(t, said(t, res), fmt.Sprintf("is locked by pid %d", os.Getpid()))
	require.Contains(t, said(t, res), "retrying")

	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_UN))
	held = false
	s, err := p.Wait(t.Context())
	require.NoError(t, err)
	res = call(t, cs, ToolWhoami, nil)
	require.False(t, res.IsError, text(res))
	require.NoError(t, s.Depart(t.Context()))
	require.NoError(t, src.Load().Close())
}

// A setup that retries stops when its bridge ends.
func TestPending_RetryAbandoned(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var attempts atomic.Int32
	p := Start(ctx, Config{Agent: "x"}, func() (actions.Source, error) {
		attempts.Add(1)
		return nil, temporaryErr{errors.New("locked")}
	})
	require.Eventually(t, func() bool { return attempts.Load() >= 1 }, testtime.Bound(10*time.Second), time.Millisecond)
	cancel()
	_, err := p.Wait(t.Context())
	require.ErrorIs(t, err, ErrSetupAbandoned)
	require.ErrorContains(t, err, "locked")
}
