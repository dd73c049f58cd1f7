package board

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A group tracks the goroutines a Board starts, so that Close can wait for
// every one of them. Once Wait has begun it starts no more.
type group struct {
	mu   sync.Mutex
	shut bool
	wg   sync.WaitGroup
}

// Go runs f in a new goroutine and reports true, or reports false without
// running f once Wait has begun.
func (g *group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Wait stops new goroutines from starting and waits for the running ones.
func (g *group) Wait() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
	g.wg.Wait()
}

// errLockClosed: the lock was closed while a caller waited for it.
var errLockClosed = errors.New("write lock closed")

// A writeLock serializes the board's write transactions: within the process
// with a one-token channel (waiting goroutines are served in order), across
// processes with flock(2) on the lock file, whose waiters the kernel wakes
// the moment the holder lets go. SQLite's own busy handler instead sleeps
// longer and longer between tries while newcomers overtake, so under
// contention some writers starve; the lock file turns that scramble into a
// queue. SQLite's locking still guards the data: the lock file only orders
// bee's writers, and a writer that ignores it (the sqlite3 shell, say) is
// merely waited for by SQLite's busy handler.
type writeLock struct {
	path  string
	token chan struct{} // holds the one token while nobody in this process holds the lock
	f     *os.File      // nil when the lock file is disabled
	fd    int
	g     *group
}

func openWriteLock(path string, disabled bool, g *group) (*writeLock, error) {
	l := &writeLock{path: path, token: make(chan struct{}, 1), g: g}
	l.token <- struct{}{}
	if disabled {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open write lock: %w", err)
	}
	l.f = f
	l.fd = int(f.Fd())
	return l, nil
}

// acquire takes the lock, or returns ctx's error once ctx is done first. On
// success the caller must call release exactly once.
//
// flock(2) cannot be interrupted, so when the lock file is held elsewhere a
// helper goroutine waits in the kernel's queue; if the caller gives up
// first, the helper gives the lock back as soon as it is granted. Its end is
// therefore bounded by the current holder's write transaction.
func (l *writeLock) acquire(ctx context.Context) (release func(), err error) {
	select {
	case <-l.token:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		// Both were ready and select chose the token.
		l.token <- struct{}{}
		return nil, err
	}
	if l.f == nil {
		return l.putToken, nil
	}
	err = unix.Flock(l.fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return l.unlock, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		l.token <- struct{}{}
		return nil, fmt.Errorf("lock %s: %w", l.path, err)
	}

	got := make(chan error)
	abandon := make(chan struct{})
	started := l.g.Go(func() {
		err := flockWait(l.fd)
		select {
		case got <- err:
		case <-abandon:
			if err == nil {
				_ = unix.Flock(l.fd, unix.LOCK_UN)
			}
			l.token <- struct{}{}
		}
	})
	if !started {
		l.token <- struct{}{}
		return nil, errLockClosed
	}
	select {
	case err := <-got:
		if err != nil {
			l.token <- struct{}{}
			return nil, fmt.Errorf("lock %s: %w", l.path, err)
		}
		return l.unlock, nil
	case <-ctx.Done():
		close(abandon)
		return nil, ctx.Err()
	}
}

// flockWait blocks until the lock file is ours.
func flockWait(fd int) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func (l *writeLock) putToken() { l.token <- struct{}{} }

func (l *writeLock) unlock() {
	_ = unix.Flock(l.fd, unix.LOCK_UN)
	l.token <- struct{}{}
}

// close waits for the holder in this process, if any, to let go and closes
// the lock file. The token is never returned, so nobody takes the lock
// afterwards; the Board cancels every waiter before it calls close.
func (l *writeLock) close() error {
	<-l.token
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
