package pgtest

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A SilentProxy stands between a test's boards and the cluster: while it
// is silent it forwards nothing, either way, and answers no new connection,
// as a server stopped with SIGSTOP or cut off by a partition looks from the
// client (the connections stay open; nothing comes back). What it read
// while silent it forwards once it speaks again, unless Cut dropped it.
type SilentProxy struct {
	l        net.Listener
	upstream string

	mu     sync.Mutex
	silent bool
	wake   chan struct{} // closed when the proxy speaks again
	epoch  int           // connections accepted before epoch are cut
	conns  []net.Conn
}

// NewSilentProxy forwards a loopback port to c until tb ends.
func NewSilentProxy(tb testing.TB, c *Cluster) *SilentProxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &SilentProxy{l: l, upstream: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), wake: make(chan struct{})}
	close(p.wake)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// URL is the cluster's URL url (from Cluster.URL), through the proxy.
func (p *SilentProxy) URL(url string) string {
	return strings.Replace(url, p.upstream, p.l.Addr().String(), 1)
}

// Quiet makes the proxy silent.
func (p *SilentProxy) Quiet() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.silent {
		p.silent, p.wake = true, make(chan struct{})
	}
}

// Speak makes the proxy forward again, what it held first.
func (p *SilentProxy) Speak() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.speakLocked()
}

// Cut makes the proxy forward again, but closes, both ways, every
// connection it holds, dropping what it held of them: what was sent while
// it was silent never arrives (a partition that ends in a reset).
func (p *SilentProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.speakLocked()
}

func (p *SilentProxy) speakLocked() {
	if p.silent {
		p.silent = false
		close(p.wake)
	}
}

// spoken returns a channel closed once the proxy forwards.
func (p *SilentProxy) spoken() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

func (p *SilentProxy) close() {
	p.l.Close()
	p.Cut()
}

// cut reports whether the connections accepted in epoch are cut.
func (p *SilentProxy) cut(epoch int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return epoch < p.epoch
}

// track keeps cs to close at Cut, and returns the current epoch.
func (p *SilentProxy) track(cs ...net.Conn) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, cs...)
	return p.epoch
}

func (p *SilentProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		epoch := p.track(c)
		go func() {
			<-p.spoken()
			if p.cut(epoch) {
				c.Close()
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				return
			}
			p.track(up)
			if p.cut(epoch) {
				c.Close()
				up.Close()
				return
			}
			go p.pipe(up, c, epoch)
			p.pipe(c, up, epoch)
		}()
	}
}

// pipe copies from src to dst, holding what it read while the proxy is
// silent, and dropping it when the connection is cut meanwhile.
func (p *SilentProxy) pipe(dst, src net.Conn, epoch int) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.spoken()
			if p.cut(epoch) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
