package loopback

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A connection is pending from its accept until Admit, then admitted until
// it closes; once closed (or evicted) it is gone.
type connState int

const (
	pending connState = iota
	admitted
	gone
)

// A tracker holds a Server's connections: the pending ones in accept
// order, and a count of the admitted ones.
type tracker struct {
	maxPending, maxAdmitted int
	grace                   time.Duration // see Options.Grace

	evicted atomic.Int64
	// freed is signalled (without blocking) whenever a connection leaves,
	// for an Accept waiting for room.
	freed chan struct{}

	mu       sync.Mutex // guards the fields below and every conn's state and elem
	pending  list.List  // of *conn, oldest first
	admitted int
}

func (t *tracker) init(maxPending, maxAdmitted int, grace time.Duration) {
	t.maxPending, t.maxAdmitted, t.grace = maxPending, maxAdmitted, grace
	t.freed = make(chan struct{}, 1)
	t.pending.Init()
}

// A conn is an accepted connection the tracker follows.
type conn struct {
	net.Conn
	t        *tracker
	accepted time.Time
	// talking is set while the connection is sending a request: when a read
	// returns bytes (or bytes were waiting at accept), until net/http finds
	// it idle again after an answer.
	talking atomic.Bool

	state connState     // guarded by t.mu
	elem  *list.Element // in t.pending while pending; guarded by t.mu
}

// Read notes that the connection talks.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.talking.Store(true)
	}
	return n, err
}

// Close gives the connection's place back and closes it.
func (c *conn) Close() error {
	c.t.remove(c)
	return c.Conn.Close()
}

// place makes c pending. When MaxPending connections are pending already,
// it evicts one (see victim) and returns it, for the caller to close
// outside the lock; when none may be evicted yet, it waits until one may
// or one leaves. It returns false, placing nothing, once done is closed.
func (t *tracker) place(c *conn, done <-chan struct{}) (evict *conn, ok bool) {
	for {
		t.mu.Lock()
		if t.pending.Len() < t.maxPending {
			t.push(c)
			t.mu.Unlock()
			return nil, true
		}
		v, wait := t.victim(time.Now())
		if v != nil {
			t.removeLocked(v)
			t.evicted.Add(1)
			t.push(c)
			t.mu.Unlock()
			return v, true
		}
		t.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-t.freed:
		case <-done:
			timer.Stop()
			return nil, false
		}
		timer.Stop()
	}
}

func (t *tracker) push(c *conn) {
	c.state = pending
	c.elem = t.pending.PushBack(c)
}

// victim picks the pending connection to evict among those pending for at
// least the grace period: the oldest silent one, else the oldest. A
// connection is silent when it has sent nothing since its accept or its
// last answer; bytes waiting unread count as sent. When every connection
// is younger than the grace period, victim returns nil and how long until
// the oldest is not.
func (t *tracker) victim(now time.Time) (*conn, time.Duration) {
	var oldest *conn
	for e := t.pending.Front(); e != nil; e = e.Next() {
		c := e.Value.(*conn)
		if now.Sub(c.accepted) < t.grace {
			break // the list is in accept order: the rest are younger still
		}
		if oldest == nil {
			oldest = c
		}
		if !c.talking.Load() && !readable(c.Conn) {
			return c, 0
		}
		c.talking.Store(true)
	}
	if oldest != nil {
		return oldest, 0
	}
	return nil, t.grace - now.Sub(t.pending.Front().Value.(*conn).accepted)
}

// admit moves c from pending to admitted if there is room; an admitted c
// stays admitted.
func (t *tracker) admit(c *conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch c.state {
	case admitted:
		return true
	case gone:
		return false
	}
	if t.admitted >= t.maxAdmitted {
		return false
	}
	t.pending.Remove(c.elem)
	c.elem = nil
	c.state = admitted
	t.admitted++
	return true
}

func (t *tracker) remove(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(c)
}

func (t *tracker) removeLocked(c *conn) {
	switch c.state {
	case pending:
		t.pending.Remove(c.elem)
		c.elem = nil
	case admitted:
		t.admitted--
	case gone:
		return
	}
	c.state = gone
	select {
	case t.freed <- struct{}{}:
	default:
	}
}

// connState is the http.Server's ConnState hook: a connection that has been
// answered and waits for another request is silent again.
func (t *tracker) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		c.talking.Store(false)
	case http.StateClosed, http.StateHijacked:
		t.remove(c)
	}
}

func (t *tracker) stats() ConnStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return ConnStats{Pending: t.pending.Len(), Admitted: t.admitted, Evicted: t.evicted.Load()}
}

// A listener wraps every accepted connection in a conn the tracker follows.
type listener struct {
	net.Listener
	t         *tracker
	done      chan struct{} // closed by Close, ending an Accept waiting for room
	closeOnce sync.Once
}

func newListener(ln net.Listener, t *tracker) *listener {
	return &listener{Listener: ln, t: t, done: make(chan struct{})}
}

// Accept accepts the next connection and makes room for it among the
// pending ones (see tracker.place).
func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, t: l.t, accepted: time.Now()}
	if readable(nc) {
		c.talking.Store(true)
	}
	evict, ok := l.t.place(c, l.done)
	if !ok {
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	if evict != nil {
		_ = evict.Conn.Close() // its serving goroutine's read fails and ends it
	}
	return c, nil
}

// Close closes the listener and ends an Accept waiting for room.
func (l *listener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type connKey struct{}

// withConn is the http.Server's ConnContext hook: it lets Admit find a
// request's connection.
func withConn(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*conn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Admit admits the connection r arrived on, so it is no longer pending:
// call it once a request has shown it is wanted (the control channel's
// token, the board page's session). It reports false when the Server
// already holds Options.MaxAdmitted admitted connections, or the
// connection has been closed; the handler should then refuse the request
// (503) rather than serve it. An admitted connection stays admitted until
// it closes. A request that came through no Server (a test's
// httptest.NewRecorder) is always admitted.
func Admit(r *http.Request) bool {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		return true
	}
	return c.t.admit(c)
}
