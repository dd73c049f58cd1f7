package clearctl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/loopback"
)

const (
	retirePath = wire.RetirePath

	// shutdownTimeout bounds Close's graceful shutdown of the HTTP server;
	// after it, open connections are closed outright. Short, because the
	// bridge must be gone within 100 ms of Claude Code's first signal, and
	// enough, because Close cancels the lifetime context first and every
	// waiting handler then answers at once: only a client still sending its
	// request can use up the bound.
	shutdownTimeout = 100 * time.Millisecond

	maxHeaderBytes = 8 << 10
	// readHeaderTimeout is the short deadline of a connection that has not
	// authenticated: the hook sends its whole request as soon as it has
	// connected, so a second is plenty, and a connection that sends nothing
	// is gone within it.
	readHeaderTimeout = time.Second
	readTimeout       = 5 * time.Second
	// writeSlack is added to AnswerWithin for the server's WriteTimeout, so
	// a handler that waits the full AnswerWithin can still write its answer.
	writeSlack = 5 * time.Second
)

// Options configures a Server. A nil *Options means all defaults.
type Options struct {
	// Logger receives the Server's log lines. If nil, nothing is logged.
	Logger *slog.Logger

	// AnswerWithin is how long the handler waits for a retire before it
	// answers 202 (the retire still completes afterwards). If zero or
	// negative, DefaultAnswerWithin.
	AnswerWithin time.Duration

	// Waker serves POST /wait-for-work. If nil, that route is not served
	// (404), as on a bridge without wake on work.
	Waker Waker

	// PathChecker serves POST /check-paths, the edit and commit guards'
	// question. If nil, that route is not served (404), as on a bridge
	// without reservations.
	PathChecker PathChecker

	// CheckWithin bounds how long POST /check-paths waits for the
	// PathChecker before it answers 503. If zero or negative,
	// DefaultCheckWithin.
	CheckWithin time.Duration
}

// A Server serves POST /retire on a loopback port. Create it with New, then
// call Start; Close ends it. Its methods may be called concurrently.
type Server struct {
	// Fixed at creation.
	tokenSum     [sha256.Size]byte // SHA-256 of the token; the token itself is not kept
	retirer      Retirer
	waker        Waker       // nil: no /wait-for-work
	checker      PathChecker // nil: no /check-paths
	checkWithin  time.Duration
	logger       *slog.Logger
	answerWithin time.Duration
	handler      http.Handler     // the whole request path: Origin/Host guard, mux, auth, body, retire
	http         *loopback.Server // listens, serves handler, admits connections
	// listen makes the listener Start serves on: nil for 127.0.0.1 on an
	// ephemeral port, or in tests an in-memory listener whose connections'
	// deadlines run on a synctest bubble's clock. Its Addr must be a
	// *net.TCPAddr. Read by Start, so a test may set it after New.
	listen func() (net.Listener, error)

	// ctx is the Server's lifetime context, the one exception to "never
	// store a context": created in New, cancelled (cause ErrClosed) by
	// Close. Every retire runs on it rather than on a request's context, so
	// a hook that hangs up or times out cannot cut a retire short, while
	// Close can.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// turn serializes calls to retirer.Retire: a retire holds its one slot
	// while it runs. A channel rather than a sync.Mutex so that a retire
	// still queued when Close is called gives up instead of waiting its turn.
	turn chan struct{}

	// retires counts running retire goroutines, waits the /wait-for-work
	// handlers inside a Waker, and checks the PathChecker calls; Close
	// waits for all three. Add happens only under mu while !closed, so
	// never after Close's Wait.
	retires sync.WaitGroup
	waits   sync.WaitGroup
	checks  sync.WaitGroup
	// running counts them too, for tests to read.
	running atomic.Int32

	closeOnce sync.Once
	closeErr  error // set once by closeOnce

	mu     sync.Mutex // guards closed
	closed bool
}

// withDefaults is a copy of opts (nil: the zero Options) with each unset
// field at its default.
func withDefaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.AnswerWithin <= 0 {
		o.AnswerWithin = DefaultAnswerWithin
	}
	if o.CheckWithin <= 0 {
		o.CheckWithin = DefaultCheckWithin
	}
	return o
}

// routes serves retire always, wait and check-paths when s has a Waker and
// a PathChecker; any other path is 404, any other method 405.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+retirePath, s.handleRetire)
	if s.waker != nil {
		mux.HandleFunc("POST "+waitPath, s.handleWait)
	}
	if s.checker != nil {
		mux.HandleFunc("POST "+checkPathsPath, s.handleCheckPaths)
	}
	return mux
}

// New returns a Server that answers requests bearing token and retires
// through r. It does not listen yet: call Start. opts is copied; nil means
// defaults.
//
// New panics if token is empty or r is nil: both are programmer errors.
func New(token string, r Retirer, opts *Options) *Server {
	if token == "" {
		panic("clearctl: New with an empty token")
	}
	if r == nil {
		panic("clearctl: New with a nil Retirer")
	}
	o := withDefaults(opts)
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Server{
		tokenSum:     sha256.Sum256([]byte(token)),
		retirer:      r,
		waker:        o.Waker,
		checker:      o.PathChecker,
		checkWithin:  o.CheckWithin,
		logger:       o.Logger,
		answerWithin: o.AnswerWithin,
		ctx:          ctx,
		cancel:       cancel,
		turn:         make(chan struct{}, 1),
	}
	s.handler = s.guard(s.routes())
	s.http = loopback.New(s.handler, &loopback.Options{
		Logger:            s.logger,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      s.answerWithin + writeSlack,
		MaxHeaderBytes:    maxHeaderBytes,
		ShutdownTimeout:   shutdownTimeout,
		// The hook sends one request per connection: nothing may idle.
		KeepAlives:  false,
		MaxPending:  MaxPending,
		MaxAdmitted: MaxConns,
		Started:     ErrStarted,
		Closed:      ErrClosed,
		Listen: func() (net.Listener, error) {
			if s.listen != nil {
				return s.listen()
			}
			return net.Listen("tcp4", "127.0.0.1:0")
		},
	})
	return s
}

// Start listens on 127.0.0.1 on an ephemeral port (see Port) and serves in a
// goroutine the Server owns until Close. It returns ErrStarted if the Server
// was already started, ErrClosed after Close, and a wrapped error if it
// cannot listen (the Server may then be started again).
func (s *Server) Start() error {
	switch err := s.http.Start(); {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrStarted):
		return err
	case err != nil:
		return fmt.Errorf("clearctl: %w", err)
	}
	s.logger.Info("clearctl listening", logkey.Port, s.Port())
	return nil
}

// Port returns the port Start is listening on, or 0 before Start succeeds.
// After Close it still returns the port the Server had.
func (s *Server) Port() int { return s.http.Port() }

// Close ends the Server: it stops new retires, waits and checks from
// starting, cancels the lifetime context (so running and queued retires see
// it done, handlers waiting on a retire or a check answer 503 at once, and
// every pending /wait-for-work is answered
// {"wake":false,"reason":"shutting down"} at once), shuts the HTTP server
// down (waiting up to 100 ms for answers in flight, then closing
// connections outright), and waits for the serving goroutine, every retire
// goroutine and every Waker and PathChecker call to end. It therefore
// returns only once the Retirer, the Waker and the PathChecker have
// returned: see Retirer, Waker and PathChecker. A retire or check arriving
// meanwhile gets 503, a waiter "shutting down".
//
// Close may be called more than once, concurrently, and without Start; every
// call returns after the first has finished, with its result. After Close,
// Start returns ErrClosed.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()

	// Cancel first: handlers waiting on a retire then answer at once, so the
	// graceful shutdown below does not wait out AnswerWithin.
	s.cancel(ErrClosed)

	var err error
	if herr := s.http.Close(); herr != nil {
		s.logger.Warn("clearctl shutdown failed", logkey.Err, herr)
		err = fmt.Errorf("clearctl: %w", herr)
	}
	s.retires.Wait()
	s.waits.Wait()
	s.checks.Wait()
	s.logger.Info("clearctl closed")
	return err
}

// guard refuses browsers and DNS rebinding (403) before anything else, and
// answers 404 for every path but /retire, /wait-for-work and /check-paths
// themselves (the last two only when served). The exact-path check keeps
// ServeMux from redirecting a non-canonical path such as /x/../retire: a
// control endpoint has no business redirecting.
func (s *Server) guard(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason := s.refusal(r); reason != "" {
			s.logger.Warn("clearctl request refused", logkey.Reason, reason, logkey.Remote, r.RemoteAddr)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if !s.serves(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serves reports whether path is one of the Server's routes.
func (s *Server) serves(path string) bool {
	switch path {
	case retirePath:
		return true
	case waitPath:
		return s.waker != nil
	case checkPathsPath:
		return s.checker != nil
	}
	return false
}

// refusal returns why r must be refused with 403, or "" if it may go on:
// any Origin at all (no browser has business here), or a Host other than
// the loopback address and port.
func (s *Server) refusal(r *http.Request) string {
	if len(r.Header.Values("Origin")) > 0 {
		return "origin"
	}
	if !s.http.HostOK(r) {
		return "host"
	}
	return ""
}

// authorized reports whether r carries exactly one Authorization header
// holding "Bearer <token>". It compares SHA-256 digests in constant time, so
// neither the token's bytes nor its length leak through timing.
func (s *Server) authorized(r *http.Request) bool {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return false
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

type retireResult struct {
	resp RetireResponse
	err  error
}

type errorBody struct {
	Error string `json:"error"`
}

type statusBody struct {
	Status string `json:"status"`
}

// admit lets a request through to its route: the token first (401, before
// any of the body is read), then a slot among the MaxConns authenticated
// connections (503 when all are taken), then the body into req (413 or 400,
// see readJSON) and req's own Validate (400). It answers a refusal itself
// and reports whether the route may go on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, req interface{ Validate() error }) bool {
	if !s.authorized(r) {
		s.logger.Warn("clearctl request refused", logkey.Reason, "token", logkey.Remote, r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", "Bearer")
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	if !loopback.Admit(r) {
		s.logger.Warn("clearctl request refused", logkey.Reason, "busy", logkey.Limit, MaxConns)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: fmt.Sprintf("bridge busy: it serves %d authenticated requests at once; try again", MaxConns)})
		return false
	}
	if code, err := readJSON(w, r, req); err != nil {
		writeJSON(w, code, errorBody{Error: err.Error()})
		return false
	}
	if err := req.Validate(); err != nil {
		s.logger.Warn("clearctl request refused", logkey.Reason, "bad body", logkey.Err, err)
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return false
	}
	return true
}

func (s *Server) handleRetire(w http.ResponseWriter, r *http.Request) {
	var req RetireRequest
	if !s.admit(w, r, &req) {
		return
	}
	done, ok := s.startRetire(req)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		return
	}
	timer := time.NewTimer(s.answerWithin)
	defer timer.Stop()
	select {
	case res := <-done:
		s.answer(w, res)
	case <-timer.C:
		s.logger.Info("retire still running, answered 202", logkey.SessionID, req.SessionID)
		writeJSON(w, http.StatusAccepted, statusBody{Status: "running"})
	case <-r.Context().Done():
		// The caller is gone; the retire carries on regardless.
		s.logger.Info("retire caller gone, retire carries on", logkey.SessionID, req.SessionID)
		writeJSON(w, http.StatusAccepted, statusBody{Status: "running"})
	case <-s.ctx.Done():
		select {
		case res := <-done:
			s.answer(w, res)
		default:
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		}
	}
}

// answer writes a finished retire's result: 200 when it succeeded, 500 when
// it failed, and 503 when it failed once Close had begun, since Close
// cancelling the retire is then the likely cause.
func (s *Server) answer(w http.ResponseWriter, res retireResult) {
	switch {
	case res.err == nil:
		writeJSON(w, http.StatusOK, res.resp)
	case s.ctx.Err() != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing: " + res.err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: res.err.Error()})
	}
}

// readJSON reads the body into v: at most MaxBodyBytes (413 beyond), empty
// (v is left as it is) or one JSON object (400 otherwise). Unknown fields are
// ignored so a newer hook can talk to an older bridge.
func readJSON(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	if r.Body == nil {
		return 0, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", MaxBodyBytes)
		}
		return http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("bad body: %w", err)
	}
	return 0, nil
}

// startRetire runs a retire in a goroutine on the lifetime context and
// returns the channel its one result arrives on. It returns false once Close
// has been called.
func (s *Server) startRetire(req RetireRequest) (<-chan retireResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	done := make(chan retireResult, 1) // buffered: the handler may have answered 202 and gone
	s.running.Add(1)
	s.retires.Go(func() {
		defer s.running.Add(-1)
		done <- s.retire(req)
	})
	return done, true
}

// retire waits its turn, then calls the Retirer on the lifetime context. A
// retire whose turn has not come when Close is called never calls the
// Retirer. A panicking Retirer is reported as a failed retire rather than
// taking the bridge down.
func (s *Server) retire(req RetireRequest) (res retireResult) {
	select {
	case s.turn <- struct{}{}:
	case <-s.ctx.Done():
		return retireResult{err: fmt.Errorf("retire not started: %w", context.Cause(s.ctx))}
	}
	defer func() { <-s.turn }()
	if s.ctx.Err() != nil { // both cases were ready and select took the turn
		return retireResult{err: fmt.Errorf("retire not started: %w", context.Cause(s.ctx))}
	}
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("retire panicked", logkey.Panic, fmt.Sprint(p), logkey.Stack, string(debug.Stack()))
			res = retireResult{err: fmt.Errorf("retire panicked: %v", p)}
		}
	}()
	resp, err := s.retirer.Retire(s.ctx, req)
	if err != nil {
		s.logger.Error("retire failed", logkey.SessionID, req.SessionID, logkey.Err, err)
		return retireResult{err: err}
	}
	s.logger.Info("retired", logkey.Previous, resp.Retired, logkey.Identity, resp.Current, logkey.SessionID, req.SessionID)
	return retireResult{resp: resp}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the caller may be gone; nothing to do about it
}
