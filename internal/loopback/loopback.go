// Package loopback serves HTTP on 127.0.0.1 for bee's two local endpoints:
// the bridge's control channel (package clearctl) and the board page
// (package boardpage). It owns the listener, the http.Server and its
// timeouts, the Host rule both endpoints share, and which connections get
// served when local processes open more than the Server will hold.
//
// A Server promises:
//
//   - It listens on 127.0.0.1 only: on Options.Port, or on an ephemeral port
//     when that is zero.
//   - [Server.HostOK] accepts exactly the Hosts 127.0.0.1:<port> and
//     localhost:<port>, so that a page served under another name (DNS
//     rebinding) is refused by whoever asks it.
//   - Every request net/http can parse reaches the handler: "OPTIONS *"
//     too, which net/http would otherwise answer itself. (It still answers
//     what it cannot parse: 400, 431, 501.) The Server adds no header to an
//     answer, so no Access-Control-* (CORS) header is ever sent unless the
//     handler sends one.
//   - Connections are admitted, not just accepted. A connection is pending
//     from its accept until the handler calls [Admit] for a request on it
//     (for the control channel: once the token has been checked). At most
//     Options.MaxPending connections are pending. One accepted beyond that
//     takes the place of the oldest pending one that has been pending for
//     Options.Grace and is silent (has sent nothing since it was accepted
//     or last answered; bytes waiting unread count as sent), else of the
//     oldest pending for Options.Grace; until one has, it waits. So
//     connections that never authenticate cannot keep out one that will:
//     they are turned over at least MaxPending per Grace, and one that
//     talks is dropped only after every silent one and only once it has
//     been pending for Grace. At most Options.MaxAdmitted connections are
//     admitted at once; Admit refuses beyond that, and the handler says so.
//   - Without Options.KeepAlives, every connection is closed after one
//     answer: nothing idles.
//   - Close shuts the server down, waiting up to Options.ShutdownTimeout
//     for answers in flight, then closes every connection, and returns once
//     the serving goroutine has. It may be called more than once,
//     concurrently, and without Start.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/internal/logkey"
)

// Defaults for Options' zero values.
const (
	DefaultMaxPending      = 64
	DefaultMaxAdmitted     = 16
	DefaultGrace           = 100 * time.Millisecond
	DefaultShutdownTimeout = 2 * time.Second
)

// ErrStarted is returned by Start when the Server has already been
// started, unless Options.Started says otherwise.
var ErrStarted = errors.New("loopback: server already started")

// ErrClosed is returned by Start after Close, unless Options.Closed says
// otherwise.
var ErrClosed = errors.New("loopback: server closed")

// Options configures a Server. A nil *Options means all defaults.
type Options struct {
	// Port is the port to listen on; zero means an ephemeral one.
	Port int

	// Logger receives net/http's own complaints (at Warn) and the Server's
	// serve failure. If nil, nothing is logged.
	Logger *slog.Logger

	// The http.Server's limits, with net/http's meaning: zero means none
	// (MaxHeaderBytes: net/http's default, 1 MiB).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int

	// ShutdownTimeout bounds how long Close waits for answers in flight
	// before it closes the connections left. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// KeepAlives lets a connection carry more than one request. If false,
	// every connection is closed after its first answer.
	KeepAlives bool

	// MaxPending bounds the connections that have not been admitted; zero
	// means DefaultMaxPending.
	MaxPending int
	// MaxAdmitted bounds the admitted connections; zero means
	// DefaultMaxAdmitted.
	MaxAdmitted int
	// Grace is how long a pending connection is safe from eviction after
	// its accept: time enough for any client to send its request. While
	// every pending connection is younger, a new one waits in the kernel's
	// accept queue, so connections that never talk are turned over at most
	// MaxPending per Grace. Zero means DefaultGrace.
	Grace time.Duration

	// Started and Closed are what Start returns when the Server has
	// already been started, and after Close: the owner's own sentinels. Nil
	// means ErrStarted and ErrClosed.
	Started, Closed error

	// Listen, if not nil, makes the listener instead of listening on
	// 127.0.0.1:Port: tests use it for an in-memory listener whose
	// connections' deadlines run on a synctest bubble's clock. Its Addr
	// must be a *net.TCPAddr.
	Listen func() (net.Listener, error)
}

// A Server serves one handler on a loopback port. Create it with New, call
// Start, end it with Close. Its methods may be called concurrently.
type Server struct {
	// Fixed at creation.
	opts    Options
	handler http.Handler
	logger  *slog.Logger

	conns tracker

	// port is the listening port: 0 until Start succeeds, kept after Close.
	port atomic.Int32

	closeOnce sync.Once
	closeErr  error // set once by closeOnce

	mu        sync.Mutex // guards the fields below
	started   bool
	closed    bool
	srv       *http.Server
	serveDone chan struct{} // closed when the Serve goroutine returns
}

// New returns a Server for h. It does not listen yet: call Start. opts is
// copied; nil means defaults. New panics if h is nil.
func New(h http.Handler, opts *Options) *Server {
	if h == nil {
		panic("loopback: New with a nil handler")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxAdmitted <= 0 {
		o.MaxAdmitted = DefaultMaxAdmitted
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Started == nil {
		o.Started = ErrStarted
	}
	if o.Closed == nil {
		o.Closed = ErrClosed
	}
	s := &Server{opts: o, handler: h, logger: o.Logger}
	s.conns.init(o.MaxPending, o.MaxAdmitted, o.Grace)
	return s
}

// Start listens and serves in a goroutine the Server owns until Close. It
// returns Options.Started if the Server was already started,
// Options.Closed after Close, and a wrapped error naming the address if it
// cannot listen (the port is taken, say); the Server may then be started
// again.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return s.opts.Closed
	case s.started:
		return s.opts.Started
	}
	ln, err := s.listen()
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1:%d: %w", s.opts.Port, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		// Without this, "OPTIONS *" would get a 200 from net/http itself,
		// around the handler's guard.
		DisableGeneralOptionsHandler: true,
		ConnState:                    s.conns.connState,
		ConnContext:                  withConn,
		ErrorLog:                     slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	srv.SetKeepAlivesEnabled(s.opts.KeepAlives)
	done := make(chan struct{})
	s.started, s.srv, s.serveDone = true, srv, done
	s.port.Store(int32(port))
	go func() {
		defer close(done)
		if err := srv.Serve(newListener(ln, &s.conns)); !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("loopback serve ended", logkey.Err, err)
		}
	}()
	return nil
}

func (s *Server) listen() (net.Listener, error) {
	if s.opts.Listen != nil {
		return s.opts.Listen()
	}
	return net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.Port)))
}

// Port returns the port the Server listens on, or 0 before Start succeeds.
// After Close it still returns the port the Server had.
func (s *Server) Port() int { return int(s.port.Load()) }

// HostOK reports whether r's Host is 127.0.0.1:<port> or localhost:<port>,
// exactly; before Start, no Host is.
func (s *Server) HostOK(r *http.Request) bool {
	port := s.Port()
	if port == 0 {
		return false
	}
	p := strconv.Itoa(port)
	return r.Host == "127.0.0.1:"+p || r.Host == "localhost:"+p
}

// Close ends the Server: it stops accepting, waits up to
// Options.ShutdownTimeout for answers in flight, then closes every
// connection left, and returns once the serving goroutine has. A handler
// that must end sooner (a long-poll, an event stream) must be told by its
// owner before Close. The error is nil when the shutdown only ran out of
// time.
//
// Close may be called more than once, concurrently, and without Start;
// every call returns after the first has finished, with its result. After
// Close, Start returns ErrClosed.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	s.mu.Lock()
	s.closed = true
	srv, serveDone := s.srv, s.serveDone
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(ctx); serr != nil {
		_ = srv.Close() // the listener is already closed; this drops the connections left
		if !errors.Is(serr, context.DeadlineExceeded) {
			err = fmt.Errorf("shutdown: %w", serr)
		}
	}
	<-serveDone
	return err
}

// ConnStats counts a Server's connections, for tests and measurements.
type ConnStats struct {
	Pending  int   // accepted, not yet admitted
	Admitted int   // admitted and still open
	Evicted  int64 // pending connections closed to make room for newer ones, in all
}

// Conns returns the Server's connection counts now.
func (s *Server) Conns() ConnStats { return s.conns.stats() }
