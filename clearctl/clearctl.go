// Package clearctl is the loopback control channel between bee-hook and a
// bridge. The bridge serves three routes: POST /retire, which the hook calls
// when the user types /clear so the bridge retires its identity and carries
// on under a new one; POST /wait-for-work, the long-poll of the
// wake-on-work waiter, which the bridge answers when there is news for the
// idle session; and POST /check-paths, which the edit and commit guards ask
// before files are written, so the bridge can say whether another live
// identity holds them.
//
// The Server promises:
//
//   - It listens on 127.0.0.1 only, on an ephemeral port, and serves POST
//     /retire, POST /wait-for-work when it has a [Waker], and POST
//     /check-paths when it has a [PathChecker]. Other paths get 404 and
//     other methods 405; it never redirects.
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
//   - A /check-paths request is answered within [Options.CheckWithin]
//     (default [DefaultCheckWithin]): 200 with the PathChecker's
//     [CheckPathsAnswer], 500 when it failed (or panicked, or answered
//     against [CheckPathsAnswer.Validate]), 503 when it has not decided in
//     time or Close has begun. A body that fails
//     [CheckPathsRequest.Validate] gets 400 and asks nothing.
//
// The requests, answers and their rules, and the client side ([Retire],
// [WaitForWork] and [CheckPaths]) that bee-hook calls, live in package
// wire, which bee-hook imports without this package's server (so without
// net/http); this package names them too. The client sends the token in
// the Authorization header only, never in the URL, and never puts it in an
// error.
package clearctl

import (
	"context"
	"errors"
	"time"
)

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

// DefaultAnswerWithin is how long the handler waits for a retire before it
// answers 202, when Options.AnswerWithin is zero.
const DefaultAnswerWithin = 5 * time.Second

// ErrStarted is returned by Start when the Server has already been started.
var ErrStarted = errors.New("clearctl: server already started")

// ErrClosed is returned by Start after Close. It is also the cause
// (context.Cause) of the lifetime context a Retirer is given, once Close has
// been called.
var ErrClosed = errors.New("clearctl: server closed")
