package board

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions/internal/wakeup"
)

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
//
// Every wait for it ends when its caller's context does, and Close never
// waits for another process. flock(2) cannot be interrupted, so a request
// the kernel queues runs in a helper goroutine (see queue); a caller that
// gives up leaves the request queued, and the next caller in this process
// takes over its place in the kernel's queue instead of queueing again. A
// grant that finds nobody waiting is given straight back. So a holder that
// is stopped (SIGSTOP, Ctrl-Z) or hung delays each caller at most its own
// timeout, and this process keeps at most one request queued however long
// the stall lasts.
//
// The holder writes its pid and the time into the lock file (see
// lockRecord), so that a caller that gives up can say who held it, and for
// how long.
type writeLock struct {
	path  string
	token chan struct{} // holds the one token while nobody in this process holds or waits for the lock
	f     *os.File      // nil when the lock file is disabled
	fd    int

	mu      sync.Mutex // guards pending, closed and the fields of pending
	pending *queued    // the request the kernel has queued for this process, if any
	closed  bool       // close has run; the helper of pending closes f

	// file is the database file the Board opened, set once by Open (bind)
	// before any write: a write is refused once the lock file marks it
	// damaged, that is when the damaged slot starts with mark.
	file fileID
	mark []byte
	// holding is Options.holdingLock.
	holding func()
	// Buffers for the record, and when it was last read for the damage
	// mark, used only by the lock's holder.
	slot        [slotSize]byte
	scratch     [slotSize]byte
	damageCheck time.Time
}

// A queued is a flock request the kernel has queued, run by the helper
// goroutine queue.
type queued struct {
	done    chan struct{} // closed once the kernel has answered
	err     error         // the kernel's answer, set before done closes
	granted bool          // the lock is held for the caller waiting, set before done closes
	waiting bool          // a caller (the token holder) waits for the answer
}

func openWriteLock(path string, disabled bool) (*writeLock, error) {
	l := &writeLock{path: path, token: make(chan struct{}, 1)}
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
// success the caller must call release exactly once. It refuses, with
// ErrCorrupt, to hand out the lock of a database file that some bee process
// has found damaged.
func (l *writeLock) acquire(ctx context.Context) (release func(), err error) {
	select {
	case <-l.token:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		// Both were ready and select chose the token.
		l.putToken()
		return nil, err
	}
	if l.f == nil {
		return l.putToken, nil
	}
	for {
		q, release, err := l.tryOrQueue()
		if q == nil {
			return release, err
		}
		if release, again, err := l.awaitQueued(ctx, q); !again {
			return release, err
		}
	}
}

// tryOrQueue takes the lock file's lock at once if it is free, or joins
// the one request waiting in the kernel's queue (making it if none is), and
// returns that request, marked waited for. With the token held.
func (l *writeLock) tryOrQueue() (q *queued, release func(), err error) {
	l.mu.Lock()
	q = l.pending
	if q == nil {
		err := unix.Flock(l.fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			l.mu.Unlock()
			release, err := l.held()
			return nil, release, err
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			l.mu.Unlock()
			l.putToken()
			return nil, nil, fmt.Errorf("lock %s: %w", l.path, err)
		}
		q = &queued{done: make(chan struct{})}
		l.pending = q
		go l.queue(q)
	}
	q.waiting = true
	l.mu.Unlock()
	return q, nil, nil
}

// awaitQueued waits for the kernel to answer q, or for ctx to end. again
// says the kernel answered while nobody waited and the lock went straight
// back: ask again.
func (l *writeLock) awaitQueued(ctx context.Context, q *queued) (release func(), again bool, err error) {
	select {
	case <-q.done:
	case <-ctx.Done():
	}

	l.mu.Lock()
	q.waiting = false
	answered := wakeup.Closed(q.done)
	if answered {
		l.pending = nil
	}
	granted, qerr := answered && q.granted, q.err
	l.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		if granted {
			_ = unix.Flock(l.fd, unix.LOCK_UN)
		}
		l.putToken()
		return nil, false, ctx.Err()
	case qerr != nil:
		l.putToken()
		return nil, false, fmt.Errorf("lock %s: %w", l.path, qerr)
	case granted:
		release, err := l.held()
		return release, false, err
	}
	return nil, true, nil
}

// queue waits in the kernel's queue for the lock file, then hands the lock
// to the caller waiting for it, or gives it back at once when nobody waits
// any more. It is the one goroutine of a writeLock not tracked by the
// Board's Life, because nothing can end it early: it ends when the kernel
// answers, that is when the process holding the lock lets go or dies, even
// after the Board has closed (it then closes the lock file, which close
// left to it).
func (l *writeLock) queue(q *queued) {
	err := flockWait(l.fd)
	l.mu.Lock()
	defer l.mu.Unlock()
	q.err = err
	if err == nil {
		if q.waiting && !l.closed {
			q.granted = true
		} else {
			_ = unix.Flock(l.fd, unix.LOCK_UN)
		}
	}
	if l.closed {
		_ = l.f.Close()
	}
	close(q.done)
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

// held records this process as the holder and checks the damage mark; the
// lock is held.
func (l *writeLock) held() (release func(), err error) {
	l.noteHolder()
	if err := l.damaged(); err != nil {
		l.unlock()
		return nil, err
	}
	if l.holding != nil {
		l.holding()
	}
	return l.unlock, nil
}

func (l *writeLock) putToken() { l.token <- struct{}{} }

func (l *writeLock) unlock() {
	_ = unix.Flock(l.fd, unix.LOCK_UN)
	l.putToken()
}

// close waits for the holder in this process, if any, to let go and closes
// the lock file, or leaves that to the helper of a request still queued in
// the kernel. It never waits for another process. The token is never
// returned, so nobody takes the lock afterwards; the Board cancels every
// waiter before it calls close.
func (l *writeLock) close() error {
	<-l.token
	if l.f == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if q := l.pending; q != nil && !wakeup.Closed(q.done) {
		return nil
	}
	return l.f.Close()
}
