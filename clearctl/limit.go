package clearctl

import (
	"net"
	"sync"
)

// MaxConns caps the connections the Server serves at once. Further
// connections wait in the kernel's accept queue until one ends (headers
// must arrive within 2 s, so an idle one ends soon), so that no local
// process can make the bridge hold an unbounded number of them.
const MaxConns = 16

// limitListener accepts at most cap(sem) connections at a time, in the
// manner of golang.org/x/net/netutil.LimitListener (a few lines are not
// worth the dependency).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close, so that an Accept waiting for a slot ends
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its slot back when it is first closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
