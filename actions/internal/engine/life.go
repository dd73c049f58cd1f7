package engine

import (
	"context"
	"sync"
	"time"
)

// A Life is a board's lifetime: its context, which Close cancels, and the
// goroutines the board starts, which Close waits for. It is made before
// the board opens its storage, so that a failed Open closes what it made
// the same way Close does.
type Life struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex // guards shut and wg.Add
	shut bool
	wg   sync.WaitGroup

	once sync.Once
	err  error
}

// NewLife returns a running Life.
func NewLife() *Life {
	ctx, cancel := context.WithCancel(context.Background())
	return &Life{ctx: ctx, cancel: cancel}
}

// Context ends when Close begins. It is the one context a board keeps:
// Close is the exception to "context comes first".
func (l *Life) Context() context.Context { return l.ctx }

// Go runs f in a new goroutine and reports true, or reports false without
// running f once Wait has begun. f must end once Context ends.
func (l *Life) Go(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

// Wait stops new goroutines from starting and waits for the running ones.
func (l *Life) Wait() {
	l.mu.Lock()
	l.shut = true
	l.mu.Unlock()
	l.wg.Wait()
}

// Bound bounds an operation: the context ends at ctx's end, after limit,
// or when the Life ends, whichever comes first.
func (l *Life) Bound(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(ctx, limit)
	stop := context.AfterFunc(l.ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

// Close ends the Life: it cancels Context, then runs shutdown (which
// stops the board's background work, calls Wait and frees what the board
// holds). Close may be called more than once; later calls return the
// first call's result.
func (l *Life) Close(shutdown func() error) error {
	l.once.Do(func() {
		l.cancel()
		l.err = shutdown()
	})
	return l.err
}
