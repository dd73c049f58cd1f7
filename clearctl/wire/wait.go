package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tractat-us/bee/internal/textcut"
)

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

// Reasons a WaitResponse gives for not waking. A bridge may give others.
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
	if err := checkTarget("wait for work", port, token); err != nil {
		return none, err
	}
	a, addr, err := post(ctx, port, token, WaitPath, req)
	switch {
	case err != nil && ctx.Err() != nil:
		return none, fmt.Errorf("wait for work: %w", ctx.Err())
	case errors.Is(err, errRefused):
		return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
	case errors.Is(err, ErrNotABridge):
		return none, fmt.Errorf("wait for work: %w", err)
	case err != nil:
		return none, fmt.Errorf("%w (%s): %w", ErrConnectionLost, addr, err)
	case a.code != 200:
		return none, &StatusError{Code: a.code, Body: errorText(a.body), Op: "wait for work"}
	}
	var shape struct {
		Wake *bool `json:"wake"`
		WaitResponse
	}
	if err := json.Unmarshal(a.body, &shape); err != nil {
		return none, fmt.Errorf("wait for work: %w: %w", ErrNotABridge, err)
	}
	out := shape.WaitResponse
	if shape.Wake == nil || *shape.Wake && out.Line == "" {
		return none, fmt.Errorf("wait for work: %w: %s", ErrNotABridge, errorText(a.body))
	}
	out.Wake = *shape.Wake
	if len(out.Line) > MaxLineBytes {
		out.Line = textcut.Bytes(out.Line, MaxLineBytes)
	}
	return out, nil
}
