// Package clearctl is the loopback control channel between bee-hook and a
// bridge. The bridge serves two routes: POST /retire, which the hook calls
// when the user types /clear so the bridge retires its identity and carries
// on under a new one, and POST /wait-for-work, the long-poll of the
// wake-on-work waiter, which the bridge answers when there is news for the
// idle session.
//
// The Server promises:
//
//   - It listens on 127.0.0.1 only, on an ephemeral port, and serves POST
//     /retire and, when it has a [Waker], POST /wait-for-work. Other paths get
//     404 and other methods 405; it never redirects.
//   - A request carrying an Origin header, or a Host other than
//     127.0.0.1:<port> or localhost:<port>, is refused with 403 before
//     anything else is looked at (browsers, DNS rebinding).
//   - Every other request needs "Authorization: Bearer <token>". The token is
//     compared in constant time; a missing or wrong one gets 401 with an empty
//     body. The Server keeps only a digest of the token and never logs it.
//   - No Access-Control-* (CORS) header is ever sent, so no web page can read
//     an answer or pass a preflight.
//   - A local process without the token cannot starve the channel. Every
//     connection carries one request and is closed after its answer,
//     refusals included, so nothing idles; its headers must arrive within
//     a second. At most [MaxConns] authenticated requests are served at
//     once (one more is answered 503 at once, saying the bridge is busy);
//     at most [MaxPending] connections wait unauthenticated, and one
//     accepted beyond that takes the place of the oldest that has sent
//     nothing (package loopback), so the hook's connection is never kept
//     out by connections that will not authenticate.
//   - Bodies are capped at [MaxBodyBytes] (413 beyond that), and headers at
//     8 KiB, with read and write timeouts on every connection. A
//     /wait-for-work request that has authenticated and sent its body has
//     its read and write deadlines lifted: it lasts as long as the Waker
//     holds it, and ends at once when its caller hangs up.
//   - A body whose session_id or transcript_path fails
//     [RetireRequest.Validate] gets 400 with an error naming the field, and
//     retires nothing.
//   - A retire runs on the Server's lifetime context, never the request's: a
//     caller that hangs up cannot cut it short, and Close can. Retires are
//     serialized, so no identity is retired twice.
//   - A retire is answered within [Options.AnswerWithin] (default
//     [DefaultAnswerWithin]): 200 with a [RetireResponse] when the retire is
//     done, 202 when it is still running (it completes afterwards), 500 when
//     it failed, and 503 when Close has begun (Close cancels retires).
//   - A waiter is answered 200 with a [WaitResponse]: whatever the Waker
//     returns, or {"wake":false,"reason":"shutting down"} at once when Close
//     has begun, whatever the Waker meant.
//
// The client side, [Retire] and [WaitForWork], is what bee-hook calls. It
// sends the token in the Authorization header only, never in the URL, and
// never puts it in an error.
package clearctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// RetireRequest is the body of POST /retire: the new Claude Code session that
// /clear started. Both fields are optional; an empty body is an empty
// RetireRequest.
type RetireRequest struct {
	SessionID      string `json:"session_id,omitempty"`
	TranscriptPath string `json:"transcript_path,omitempty"`
}

// RetireResponse is the body of a 200 answer to POST /retire.
type RetireResponse struct {
	Retired string `json:"retired"` // the old identity
	Current string `json:"current"` // the identity the bridge carries on under
}

// A Retirer retires the bridge's current identity and reports the old one and
// the new one.
//
// The Server never calls Retire concurrently: each call sees the outcome of
// the one before, so each retires whatever identity is current when its turn
// comes. ctx is the Server's lifetime context, never a request's: it ends
// only when Server.Close is called, and Close waits for Retire to return, so
// Retire must return promptly once ctx is done.
type Retirer interface {
	Retire(ctx context.Context, req RetireRequest) (RetireResponse, error)
}

// RetirerFunc adapts a function to a Retirer.
type RetirerFunc func(ctx context.Context, req RetireRequest) (RetireResponse, error)

// Retire calls f(ctx, req).
func (f RetirerFunc) Retire(ctx context.Context, req RetireRequest) (RetireResponse, error) {
	return f(ctx, req)
}

var _ Retirer = RetirerFunc(nil)

const (
	// DefaultAnswerWithin is how long the handler waits for a retire before
	// it answers 202, when Options.AnswerWithin is zero.
	DefaultAnswerWithin = 5 * time.Second

	// DefaultClientTimeout bounds Retire when its ctx has no deadline. It is
	// longer than DefaultAnswerWithin so the bridge's own answer (200, 202 or
	// 500) arrives before the client gives up.
	DefaultClientTimeout = 8 * time.Second

	// MaxBodyBytes caps the body of POST /retire; a longer one gets 413.
	MaxBodyBytes = 64 << 10
)

// ErrStarted is returned by Start when the Server has already been started.
var ErrStarted = errors.New("clearctl: server already started")

// ErrClosed is returned by Start after Close. It is also the cause
// (context.Cause) of the lifetime context a Retirer is given, once Close has
// been called.
var ErrClosed = errors.New("clearctl: server closed")

// ErrNotListening is returned (wrapped, together with the dial error) by
// Retire when nothing accepts connections on the port: the bridge has ended,
// or the run file is stale.
var ErrNotListening = errors.New("retire: bridge not listening")

// ErrNotABridge is returned (wrapped) by Retire and WaitForWork when an
// answer of 200 does not have the shape a bee bridge gives it: a retire's
// must name two different identities, a waiter's must say whether to wake.
// Whatever listens on the port is not a bee bridge (a stale run file whose
// port another server has since taken), and nothing has been retired.
var ErrNotABridge = errors.New("the answer is not a bee bridge's")

// A StatusError is returned by Retire and WaitForWork when the bridge
// answers anything but 200. Code 202 means the retire is still running and
// will complete on its own; 500 means it failed; 503 means the bridge is
// closing; 401 means the token was wrong; 404 from WaitForWork means a bridge
// that does not serve /wait-for-work.
type StatusError struct {
	Code int    // the HTTP status
	Body string // the answer's body on one line, cut to 512 bytes; empty for 401 and 403
	// Op is the call that got the answer: "" for a retire, "wait for work"
	// for a waiter.
	Op string
}

// Error returns, for example, `retire: bridge answered 202 Accepted: {"status":"running"}`.
func (e *StatusError) Error() string {
	op := e.Op
	if op == "" {
		op = "retire"
	}
	msg := fmt.Sprintf("%s: bridge answered %d %s", op, e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Log messages are fixed lowercase strings; details go in attributes, keyed
// by package logkey. The token is never an attribute.
