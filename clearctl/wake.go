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

const waitPath = wire.WaitPath

// A Waker holds a waiter's long-poll until there is news for the session:
// it returns Wake true with the line to show the model, or Wake false with a
// reason.
//
// ctx ends when the waiter hangs up or when Server.Close is called (its
// cause is then ErrClosed); WaitForWork must return promptly once ctx is
// done, since Close waits for it. The Server may call WaitForWork
// concurrently; a Waker decides what a newer call means for an older one
// (bee's bridge answers the older ReasonSuperseded).
type Waker interface {
	WaitForWork(ctx context.Context, req WaitRequest) WaitResponse
}

// WakerFunc adapts a function to a Waker.
type WakerFunc func(ctx context.Context, req WaitRequest) WaitResponse

// WaitForWork calls f(ctx, req).
func (f WakerFunc) WaitForWork(ctx context.Context, req WaitRequest) WaitResponse {
	return f(ctx, req)
}

var _ Waker = WakerFunc(nil)

// handleWait serves POST /wait-for-work: a long-poll that lasts as long as
// the Waker holds it. It lifts the connection's read and write deadlines
// (only once the caller has authenticated and sent its whole body), so the
// server's timeouts, meant for /retire, never cut a waiter off; the
// request's context still ends at once when the caller hangs up.
func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	var req WaitRequest
	if !s.admit(w, r, &req) {
		return
	}
	if !s.startWait() {
		writeJSON(w, http.StatusOK, WaitResponse{Reason: ReasonShuttingDown})
		return
	}
	defer s.waits.Done()

	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		s.logger.Warn("wait-for-work keeps its read deadline", logkey.Err, err)
	}
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		s.logger.Warn("wait-for-work keeps its write deadline", logkey.Err, err)
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	defer stop()

	resp := s.wait(ctx, req)
	if s.ctx.Err() != nil {
		// Whatever the Waker meant, the bridge is going: the waiter must
		// look for its successor, not start a turn this bridge cannot serve.
		resp = WaitResponse{Reason: ReasonShuttingDown}
	}
	writeJSON(w, http.StatusOK, resp)
}

// wait calls the Waker, turning a panic into a non-waking answer rather than
// taking the bridge down.
func (s *Server) wait(ctx context.Context, req WaitRequest) (resp WaitResponse) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("wait-for-work panicked", logkey.Panic, fmt.Sprint(p), logkey.Stack, string(debug.Stack()))
			resp = WaitResponse{Reason: "bridge error"}
		}
	}()
	return s.waker.WaitForWork(ctx, req)
}

// startWait counts a long-poll in, unless Close has begun.
func (s *Server) startWait() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.waits.Add(1)
	return true
}
