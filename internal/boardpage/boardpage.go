// Package boardpage serves the board page: a live web view of an
// actions.Board that a person keeps open beside their sessions, with forms
// to post, cancel and re-address actions, and to answer or decline the
// questions agents asked the person (the "For you" view, foryou.go).
//
// The Server promises:
//
//   - It listens on 127.0.0.1 only (ephemeral port unless Options.Port).
//   - Nothing from the board is answered without the session cookie. The
//     cookie is set once, by the first request carrying the one-time login
//     token of LoginURL, which then redirects to the clean URL; the token
//     never works twice. The cookie is HttpOnly, SameSite=Strict and Path=/,
//     lives as long as the browser session, and is named after the port, since
//     browsers do not keep cookies apart by port. Tokens and cookies are
//     compared as SHA-256 digests in constant time and never logged.
//   - A request whose Host is not 127.0.0.1:<port> or localhost:<port>, or
//     whose Origin is present and not one of those two origins, is refused
//     with 403 before anything else is looked at (other sites, DNS
//     rebinding). The one exception is "Origin: null" on a request the
//     browser itself marks Sec-Fetch-Site: same-origin: that is how
//     Chromium sends this page's own forms under Referrer-Policy:
//     no-referrer. A POST from another origin is refused too, as
//     net/http's CrossOriginProtection decides (Sec-Fetch-Site
//     cross-site or same-site, or else an Origin that is not the Host). No
//     CORS header is ever sent.
//   - Refusals (401, 403, 503) close their connection. Connections are
//     bounded (package loopback): at most [MaxSignedInConns] that have
//     carried a signed-in request, and at most [MaxOtherConns] others, a
//     connection beyond those taking the place of the oldest silent one; a
//     signed-in request beyond [MaxSignedInConns] connections is answered
//     503, saying so. At most [MaxEventStreams] event streams are open at
//     once; one more is answered 503, saying so.
//   - Every form carries a CSRF token tied to the session, checked in constant
//     time; a POST without it is refused with 403 and changes nothing.
//   - Every answer carries a Content-Security-Policy that allows only the
//     page's own embedded script and style (no inline script, no other
//     origin, no framing), X-Content-Type-Options: nosniff and
//     Referrer-Policy: no-referrer. Board text is escaped by html/template;
//     none of it is ever trusted as markup.
//   - The page updates within a second of a change: one goroutine waits on
//     Board.Changes and tells every open page over server-sent events, and
//     the page fetches the part that changed. The live agents are compared
//     every Options.MemberEvery while a page is open, since the board reports
//     joins and waiter changes to nobody.
//   - Close ends everything it started: the event streams, the waiting
//     goroutine and the HTTP server. It does not close the Board.
//
// The Server acts on the board as one person (New's person, "user:<name>"):
// that name is what the board records as the poster of what is posted, the
// canceller of what is cancelled and the person who answered or declined a
// question; no form field can name anyone else.
package boardpage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/loopback"
)

const (
	// DefaultMemberEvery is how often the live agents are compared while a
	// page is open, when Options.MemberEvery is zero.
	DefaultMemberEvery = 2 * time.Second

	// MaxFormBytes caps a form's body; a larger one is refused with 413.
	MaxFormBytes = 256 << 10

	// MaxSignedInConns bounds the connections that have carried a
	// signed-in request; MaxOtherConns the others (not signed in yet, or
	// only fetching the page's script and style). A browser opens about
	// six per host.
	MaxSignedInConns = 64
	MaxOtherConns    = 64

	// MaxEventStreams bounds the event streams open at once: one per open
	// page. A browser holds at most about six (one per connection).
	MaxEventStreams = 32

	// shutdownTimeout bounds Close's graceful shutdown. Event streams end
	// as soon as Close cancels the lifetime context, so only a request in
	// flight can use it up.
	shutdownTimeout = 2 * time.Second

	maxHeaderBytes    = 16 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second // event streams lift it, write by write
	idleTimeout       = 60 * time.Second

	// boardTimeout bounds one request's work on the board.
	boardTimeout = 10 * time.Second
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("boardpage: server closed")

// ErrStarted is returned by Start when the Server has already started.
var ErrStarted = errors.New("boardpage: server already started")

// Options configures a Server. A nil *Options means all defaults.
type Options struct {
	// Port is the loopback port to listen on. If zero, an ephemeral port.
	Port int

	// Logger receives the Server's log lines. If nil, nothing is logged.
	Logger *slog.Logger

	// MemberEvery is how often the live agents are compared while at least
	// one page is open. If zero or negative, DefaultMemberEvery.
	MemberEvery time.Duration
}

// A Server serves the board page. Create it with New, call Start, and end
// it with Close. Its methods may be called concurrently.
type Server struct {
	// Fixed at creation.
	board       actions.Board
	person      actions.Poster
	logger      *slog.Logger
	memberEvery time.Duration
	handler     http.Handler
	http        *loopback.Server // listens, serves handler, bounds connections
	cop         *http.CrossOriginProtection
	loginToken  string            // in LoginURL only; never logged
	loginSum    [sha256.Size]byte // SHA-256 of loginToken, for the constant-time check
	csrfKey     []byte            // keys the session's CSRF token

	// ctx is the Server's lifetime context, the one stored context:
	// created in New, cancelled by Close. Event streams and the change
	// watcher run until it ends, so that Close can end them.
	ctx    context.Context
	cancel context.CancelFunc

	hub hub

	// loginUsed is set by the first request carrying the login token.
	loginUsed atomic.Bool

	sessMu sync.Mutex // guards sess
	sess   *session   // nil until the login token is used

	closeOnce sync.Once
	closeErr  error // set once by closeOnce

	mu          sync.Mutex    // guards the fields below
	closed      bool          // Close has begun: no watcher starts
	watcherDone chan struct{} // closed when the change watcher returns; nil before Start
}

// New returns a Server for b that acts as person ("user:<name>"). It does
// not listen yet: call Start. opts is copied; nil means defaults.
//
// New panics if b is nil or person is empty: both are programmer errors.
func New(b actions.Board, person actions.Poster, opts *Options) *Server {
	if b == nil {
		panic("boardpage: New with a nil Board")
	}
	if person == "" {
		panic("boardpage: New with no person")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MemberEvery <= 0 {
		o.MemberEvery = DefaultMemberEvery
	}
	token := randomToken()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		board:       b,
		person:      person,
		logger:      o.Logger,
		memberEvery: o.MemberEvery,
		loginToken:  token,
		loginSum:    sha256.Sum256([]byte(token)),
		csrfKey:     []byte(randomToken()),
		ctx:         ctx,
		cancel:      cancel,
	}
	s.hub.init()
	s.cop = http.NewCrossOriginProtection()
	s.handler = s.routes()
	s.http = loopback.New(s.handler, &loopback.Options{
		Port:              o.Port,
		Logger:            o.Logger,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ShutdownTimeout:   shutdownTimeout,
		KeepAlives:        true,
		MaxPending:        MaxOtherConns,
		MaxAdmitted:       MaxSignedInConns,
		Started:           ErrStarted,
		Closed:            ErrClosed,
	})
	return s
}

// randomToken returns 32 bytes from crypto/rand, base64url-encoded.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Start listens on 127.0.0.1 and serves, and starts watching the board for
// changes; both run until Close. It returns ErrStarted when already
// started, ErrClosed after Close, and a wrapped error when it cannot listen
// (the port is taken, say); the Server may then be started again.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.http.Start(); err != nil {
		return err
	}
	s.watcherDone = make(chan struct{})
	go func() {
		defer close(s.watcherDone)
		s.watch()
	}()
	s.logger.Info("board page listening", logkey.Port, s.Port())
	return nil
}

// Port returns the port the Server listens on, or 0 before Start.
func (s *Server) Port() int { return s.http.Port() }

// LoginURL returns the URL that signs a browser in: it carries the
// one-time login token, so print it only to the person running the Server.
// It is "" before Start.
func (s *Server) LoginURL() string {
	p := s.Port()
	if p == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s?token=%s", p, loginPath, s.loginToken)
}

// Close ends the Server: it cancels the lifetime context (ending every
// event stream and the change watcher), shuts the HTTP server down (waiting
// up to 2 s for requests in flight, then closing connections outright) and
// waits for every goroutine it started. It does not close the Board.
//
// Close may be called more than once, concurrently, and without Start;
// every call returns the first call's result. After Close, Start returns
// ErrClosed.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	s.mu.Lock()
	s.closed = true
	watcherDone := s.watcherDone
	s.mu.Unlock()

	s.cancel()
	var err error
	if herr := s.http.Close(); herr != nil {
		s.logger.Warn("board page shutdown failed", logkey.Err, herr)
		err = fmt.Errorf("boardpage: %w", herr)
	}
	if watcherDone != nil {
		<-watcherDone
		s.logger.Info("board page closed")
	}
	return err
}
