package clearctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/textcut"
)

const waitPath = "/wait-for-work"

// WaitRequest is the body of POST /wait-for-work: who is waiting. Every
// field is optional; an empty body is an empty WaitRequest.
type WaitRequest struct {
	// PID is the waiter's process id, for the bridge's log.
	PID int `json:"pid,omitempty"`
	// SessionID is the Claude Code session from the hook's input.
	SessionID string `json:"session_id,omitempty"`
	// HookEventName is the event that started the waiter: Stop or
	// SessionStart.
	HookEventName string `json:"hook_event_name,omitempty"`
	// RearmSeconds asks the bridge to answer with a re-arm wake (see
	// [WaitResponse]) after this many seconds, shortly before Claude Code's
	// own timeout would kill the waiter without a word. 0 means never.
	RearmSeconds int `json:"rearm_seconds,omitempty"`
}

// MaxRearmSeconds bounds WaitRequest.RearmSeconds: a week, far beyond
// Claude Code's longest hook timeout in bee's configuration.
const MaxRearmSeconds = 7 * 24 * 3600

// Validate reports why req cannot be a waiter's request: a session_id that
// CheckSessionID refuses, a hook_event_name other than "", "Stop" or
// "SessionStart", a negative pid, or a rearm_seconds outside
// 0..MaxRearmSeconds. The bridge answers such a request 400.
func (req WaitRequest) Validate() error {
	if err := CheckSessionID(req.SessionID); err != nil {
		return err
	}
	switch req.HookEventName {
	case "", "Stop", "SessionStart":
	default:
		return fmt.Errorf("hook_event_name %q is not Stop or SessionStart", textcut.Bytes(req.HookEventName, 64))
	}
	if req.PID < 0 {
		return fmt.Errorf("pid %d is negative", req.PID)
	}
	if req.RearmSeconds < 0 || req.RearmSeconds > MaxRearmSeconds {
		return fmt.Errorf("rearm_seconds %d is outside 0..%d", req.RearmSeconds, MaxRearmSeconds)
	}
	return nil
}

// WaitResponse is the body of a 200 answer to POST /wait-for-work. Wake true
// means: print Line (one line, at most [MaxLineBytes]) and start a turn.
// Wake false means: end without waking; Reason says why (see the Reason
// constants).
type WaitResponse struct {
	Wake   bool   `json:"wake"`
	Line   string `json:"line,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Reasons a WaitResponse gives for not waking. A Waker may give others.
const (
	// ReasonSuperseded: a newer waiter of the same session took this one's
	// place; only the newest waits.
	ReasonSuperseded = "superseded"
	// ReasonShuttingDown: the bridge is ending (the session is ending, or
	// a /mcp reconnect is replacing it); a waiter looks for a newer bridge.
	ReasonShuttingDown = "shutting down"
)

// MaxLineBytes bounds WaitResponse.Line as the client returns it.
const MaxLineBytes = 1000

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

// ErrConnectionLost is returned (wrapped) by WaitForWork when the connection
// to the bridge broke before an answer came: the bridge ended or was killed.
var ErrConnectionLost = errors.New("wait for work: connection to the bridge lost")

// WaitForWork registers a waiter with the bridge listening on
// 127.0.0.1:port, authenticating with token, and returns the bridge's answer
// when it comes: there is no timeout but ctx's. The token goes only in the
// Authorization header, as with Retire.
//
// Errors:
//   - nothing listening on the port: an error wrapping ErrNotListening;
//   - the connection broke before an answer: an error wrapping
//     ErrConnectionLost;
//   - any answer but 200: a *StatusError (401: wrong token; 404: a bridge too
//     old to serve the route);
//   - a 200 whose body is not a JSON object with a boolean "wake", or that
//     wakes with no line: an error wrapping ErrNotABridge;
//   - ctx ending first: an error wrapping ctx's error;
//   - port outside 1..65535 or an empty token: an error, and no request.
//
// A Line longer than MaxLineBytes is cut there and marked with "…".
func WaitForWork(ctx context.Context, port int, token string, req WaitRequest) (WaitResponse, error) {
	var none WaitResponse
	hreq, addr, err := newPost(ctx, "wait for work", port, token, waitPath, req)
	if err != nil {
		return none, err
	}
	resp, err := newClient().Do(hreq)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return none, fmt.Errorf("wait for work: %w", ctx.Err())
		case errors.Is(err, syscall.ECONNREFUSED):
			return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
		}
		return none, fmt.Errorf("%w (%s): %w", ErrConnectionLost, addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		if ctx.Err() != nil {
			return none, fmt.Errorf("wait for work: %w", ctx.Err())
		}
		return none, fmt.Errorf("%w: read answer: %w", ErrConnectionLost, err)
	}
	if resp.StatusCode != http.StatusOK {
		return none, &StatusError{Code: resp.StatusCode, Body: errorText(data), Op: "wait for work"}
	}
	var shape struct {
		Wake *bool `json:"wake"`
		WaitResponse
	}
	if err := json.Unmarshal(data, &shape); err != nil {
		return none, fmt.Errorf("wait for work: %w: %w", ErrNotABridge, err)
	}
	out := shape.WaitResponse
	if shape.Wake == nil || *shape.Wake && out.Line == "" {
		return none, fmt.Errorf("wait for work: %w: %s", ErrNotABridge, errorText(data))
	}
	out.Wake = *shape.Wake
	if len(out.Line) > MaxLineBytes {
		out.Line = textcut.Bytes(out.Line, MaxLineBytes)
	}
	return out, nil
}
