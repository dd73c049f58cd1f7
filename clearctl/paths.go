package clearctl

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/internal/logkey"
)

const checkPathsPath = wire.CheckPathsPath

// DefaultCheckWithin is how long the Server waits for a PathChecker before
// it answers 503 "no decision", when Options.CheckWithin is zero. Well under
// a second: the edit guard allows whatever the bridge has not decided within
// its own bound, and says so.
const DefaultCheckWithin = 500 * time.Millisecond

// A PathChecker decides whether the paths a tool is about to write are held
// by another live identity. bee's bridge implements it over its board.
//
// CheckPaths answers Allow true when none is, or Allow false with the
// reservations that hold them (at least one). It answers for the bridge's
// current identity: that identity's own reservations never stop it. It
// returns an error only when it cannot decide (the board cannot be read);
// the Server answers that 500 and the hook then allows, saying so.
//
// ctx ends when the Server's bound (Options.CheckWithin) passes, the caller
// hangs up, or Server.Close is called (cause ErrClosed); CheckPaths should
// return promptly then, since Close waits for it. The Server may call it
// concurrently, and concurrently with a Retirer's Retire.
type PathChecker interface {
	CheckPaths(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error)
}

// PathCheckerFunc adapts a function to a PathChecker.
type PathCheckerFunc func(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error)

// CheckPaths calls f(ctx, req).
func (f PathCheckerFunc) CheckPaths(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error) {
	return f(ctx, req)
}

var _ PathChecker = PathCheckerFunc(nil)

type checkResult struct {
	answer CheckPathsAnswer
	err    error
}

// handleCheckPaths serves POST /check-paths: it asks the PathChecker, on a
// context that ends after CheckWithin, when the caller hangs up or when
// Close is called, and answers 200 with its answer, 500 when it failed,
// and 503 when it did not decide in time or the bridge is closing.
func (s *Server) handleCheckPaths(w http.ResponseWriter, r *http.Request) {
	var req CheckPathsRequest
	if !s.admit(w, r, &req) {
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	defer stop()
	ctx, cancelT := context.WithTimeout(ctx, s.checkWithin)
	defer cancelT()

	done, ok := s.startCheck(ctx, req)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		return
	}
	select {
	case res := <-done:
		switch {
		case res.err != nil:
			s.logger.Warn("check paths failed", logkey.Tool, req.Tool, logkey.Err, res.err)
			writeJSON(w, http.StatusInternalServerError, errorBody{Error: res.err.Error()})
		default:
			writeJSON(w, http.StatusOK, res.answer)
		}
	case <-ctx.Done():
		// The PathChecker has not returned: it may ignore ctx, so do not
		// wait for it (Close does).
		switch {
		case s.ctx.Err() != nil:
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		default:
			s.logger.Warn("check paths undecided", logkey.Tool, req.Tool, logkey.Within, s.checkWithin)
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: fmt.Sprintf("the bridge did not decide within %s", s.checkWithin)})
		}
	}
}

// startCheck runs the PathChecker in a goroutine Close waits for, and
// returns the channel its one result arrives on. It returns false once
// Close has been called.
func (s *Server) startCheck(ctx context.Context, req CheckPathsRequest) (<-chan checkResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	done := make(chan checkResult, 1) // buffered: the handler may have answered and gone
	s.checks.Go(func() { done <- s.check(ctx, req) })
	return done, true
}

// check calls the PathChecker, turning a panic into an error rather than
// taking the bridge down, and an answer that breaks CheckPathsAnswer's
// rules into an error; a list of conflicts longer than MaxConflicts is cut
// there, counted in More.
func (s *Server) check(ctx context.Context, req CheckPathsRequest) (res checkResult) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("check paths panicked", logkey.Panic, fmt.Sprint(p), logkey.Stack, string(debug.Stack()))
			res = checkResult{err: fmt.Errorf("check paths panicked: %v", p)}
		}
	}()
	a, err := s.checker.CheckPaths(ctx, req)
	if err != nil {
		return checkResult{err: err}
	}
	if n := len(a.Conflicts); n > MaxConflicts {
		a.Conflicts, a.More = a.Conflicts[:MaxConflicts:MaxConflicts], a.More+n-MaxConflicts
	}
	if err := a.Validate(); err != nil {
		return checkResult{err: fmt.Errorf("the bridge's path checker gave a bad answer: %w", err)}
	}
	return checkResult{answer: a}
}
