// Package wire is bee's loopback control channel as its callers see it:
// the requests and answers of the bridge's routes (POST /retire, POST
// /wait-for-work, POST /check-paths), the rules a bridge holds them to, and
// the client bee-hook calls them with ([Retire], [WaitForWork],
// [CheckPaths]). Package clearctl serves them, and names everything here
// under the same names.
//
// The client speaks HTTP/1.0 over a bare loopback TCP socket of its own
// making: it imports neither net nor net/http, so that bee-hook, which
// starts on every edit as a PreToolUse hook, is a small, statically linked
// binary that starts in about the time an empty Go program does (see
// cmd/bee-hook's BenchmarkGuard). What that client promises:
//
//   - It connects to 127.0.0.1:<port> only: no proxy, no name to resolve,
//     no redirect followed. One request per connection, closed after the
//     answer.
//   - The token goes in the Authorization header only, never in the URL,
//     and never in an error.
//   - It reads at most 64 KiB of an answer, and returns when its context
//     ends (deadline or cancellation), at once, whatever the bridge does.
package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/internal/textcut"
)

// The routes' paths.
const (
	RetirePath     = "/retire"
	WaitPath       = "/wait-for-work"
	CheckPathsPath = "/check-paths"
)

// MaxBodyBytes caps the body of every request; a bridge answers a longer
// one 413.
const MaxBodyBytes = 64 << 10

const (
	maxAnswerBytes     = 64 << 10 // the most of an answer (headers, then body) a client reads
	maxStatusBodyBytes = 512      // the most of a body a StatusError carries
)

// ErrNotListening is returned (wrapped, together with the connect error) by
// Retire, WaitForWork and CheckPaths when nothing accepts connections on
// the port: the bridge has ended, or the run file is stale.
var ErrNotListening = errors.New("retire: bridge not listening")

// ErrNotABridge is returned (wrapped) by Retire, WaitForWork and CheckPaths
// when an answer of 200 does not have the shape a bee bridge gives it: a
// retire's must name two different identities, a waiter's must say whether
// to wake, a guard's must pass CheckPathsAnswer.Validate. Whatever listens
// on the port is not a bee bridge (a stale run file whose port another
// server has since taken), and nothing has been retired.
var ErrNotABridge = errors.New("the answer is not a bee bridge's")

// ErrConnectionLost is returned (wrapped) by WaitForWork when the connection
// to the bridge broke before an answer came: the bridge ended or was killed.
var ErrConnectionLost = errors.New("wait for work: connection to the bridge lost")

// A StatusError is returned by Retire, WaitForWork and CheckPaths when the
// bridge answers anything but 200. Code 202 means the retire is still
// running and will complete on its own; 500 means it failed; 503 means the
// bridge is closing (or busy, or has not decided in time); 401 means the
// token was wrong; 404 from WaitForWork or CheckPaths means a bridge too old
// to serve the route.
type StatusError struct {
	Code int    // the HTTP status
	Body string // the answer's body on one line, cut to 512 bytes; empty for 401 and 403
	// Op is the call that got the answer: "" for a retire, "wait for work"
	// for a waiter, "check paths" for a guard.
	Op string
}

// Error returns, for example, `retire: bridge answered 202 Accepted: {"status":"running"}`.
func (e *StatusError) Error() string {
	op := e.Op
	if op == "" {
		op = "retire"
	}
	msg := fmt.Sprintf("%s: bridge answered %d", op, e.Code)
	if text := statusText[e.Code]; text != "" {
		msg += " " + text
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// statusText holds net/http's StatusText of the statuses a bridge (or
// net/http before it) answers.
var statusText = map[int]string{
	200: "OK",
	202: "Accepted",
	400: "Bad Request",
	401: "Unauthorized",
	403: "Forbidden",
	404: "Not Found",
	405: "Method Not Allowed",
	408: "Request Timeout",
	413: "Request Entity Too Large",
	431: "Request Header Fields Too Large",
	500: "Internal Server Error",
	501: "Not Implemented",
	502: "Bad Gateway",
	503: "Service Unavailable",
	504: "Gateway Timeout",
	505: "HTTP Version Not Supported",
}

// errorText makes an answer's body fit a one-line error: valid UTF-8,
// whitespace runs (newlines too) flattened to one space, at most
// maxStatusBodyBytes and then "…".
func errorText(data []byte) string {
	s := strings.ToValidUTF8(string(data), "\uFFFD")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxStatusBodyBytes {
		return s
	}
	return textcut.Bytes(s, maxStatusBodyBytes)
}
