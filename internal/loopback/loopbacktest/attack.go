// Package loopbacktest starves a loopback HTTP server the ways issue 20
// found to starve bee's control channel, so that tests and benchmarks can
// show a server serving its real callers through it. It owns the attack's
// goroutines and connections: Stop ends them all and closes every socket.
package loopbacktest

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// An Attack is a set of local processes with no token hammering a loopback
// server at Addr ("127.0.0.1:<port>"):
//
//   - Refused sockets each send Request (one the server refuses, such as a
//     POST without a token) every Every, on one keep-alive connection for as
//     long as the server keeps it open, and reconnect when it closes it.
//   - Idle sockets each connect, send nothing, and reconnect as soon as the
//     server closes the connection.
//   - Slow sockets each send a request's headers a byte at a time, one
//     every Every (slowloris), and reconnect as soon as the server closes
//     the connection.
type Attack struct {
	Addr    string
	Refused int
	Every   time.Duration
	// Request is the raw HTTP/1.1 request the refused sockets send; it must
	// ask for keep-alive (no "Connection: close"). Empty means a POST
	// /retire with no token and Host Addr.
	Request string
	Idle    int
	Slow    int
}

// Stats counts what an attack did.
type Stats struct {
	Connects int64 // connections opened
	Requests int64 // refused requests answered
}

// A Running attack goes on until Stop.
type Running struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	connects atomic.Int64
	requests atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Start starts the attack's goroutines; they run until Stop.
func (a Attack) Start() *Running {
	if a.Every <= 0 {
		a.Every = 8 * time.Second
	}
	if a.Request == "" {
		a.Request = "POST /retire HTTP/1.1\r\nHost: " + a.Addr + "\r\nContent-Length: 0\r\n\r\n"
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, conns: map[net.Conn]struct{}{}}
	for range a.Refused {
		r.wg.Go(func() { r.refused(ctx, a) })
	}
	for range a.Idle {
		r.wg.Go(func() { r.idle(ctx, a.Addr) })
	}
	for range a.Slow {
		r.wg.Go(func() { r.slow(ctx, a) })
	}
	return r
}

// Stop ends the attack, closes its sockets and returns what it did.
func (r *Running) Stop() Stats {
	r.cancel()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return Stats{Connects: r.connects.Load(), Requests: r.requests.Load()}
}

// dial connects to addr, registering the connection so Stop can close
// it. It backs off briefly on a failed dial (a full accept queue, or out
// of descriptors) and returns nil once ctx ends.
func (r *Running) dial(ctx context.Context, addr string) net.Conn {
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		r.mu.Lock()
		if ctx.Err() != nil {
			r.mu.Unlock()
			_ = c.Close()
			return nil
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.connects.Add(1)
		return c
	}
	return nil
}

func (r *Running) hangUp(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

// refused sends a refused request every a.Every on one connection while
// the server keeps it, reading each answer.
func (r *Running) refused(ctx context.Context, a Attack) {
	for {
		c := r.dial(ctx, a.Addr)
		if c == nil {
			return
		}
		br := bufio.NewReader(c)
		for ctx.Err() == nil {
			if _, err := c.Write([]byte(a.Request)); err != nil {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			_ = resp.Body.Close()
			r.requests.Add(1)
			if resp.Close {
				break
			}
			sleep(ctx, a.Every)
		}
		r.hangUp(c)
		if ctx.Err() != nil {
			return
		}
	}
}

// idle holds a connection that sends nothing until the server closes it,
// then reconnects at once.
func (r *Running) idle(ctx context.Context, addr string) {
	buf := make([]byte, 512)
	for {
		c := r.dial(ctx, addr)
		if c == nil {
			return
		}
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		r.hangUp(c)
		if ctx.Err() != nil {
			return
		}
	}
}

// slow sends a.Request's bytes one every a.Every until the server closes
// the connection, then reconnects.
func (r *Running) slow(ctx context.Context, a Attack) {
	for {
		c := r.dial(ctx, a.Addr)
		if c == nil {
			return
		}
		for i := 0; ctx.Err() == nil; i = (i + 1) % len(a.Request) {
			if _, err := c.Write([]byte{a.Request[i]}); err != nil {
				break
			}
			sleep(ctx, a.Every)
		}
		r.hangUp(c)
		if ctx.Err() != nil {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Connects returns how many connections the attack has opened so far.
func (r *Running) Connects() int64 { return r.connects.Load() }
