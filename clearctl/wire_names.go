package clearctl

import (
	"context"

	"github.com/tractat-us/bee/clearctl/wire"
)

// The channel's requests, answers, rules and client live in package wire,
// which bee-hook imports without this package's server (and so without
// net/http). They are named here too, as they always were.

type (
	// RetireRequest is wire.RetireRequest: the body of POST /retire.
	RetireRequest = wire.RetireRequest
	// RetireResponse is wire.RetireResponse: a 200 answer to POST /retire.
	RetireResponse = wire.RetireResponse
	// WaitRequest is wire.WaitRequest: the body of POST /wait-for-work.
	WaitRequest = wire.WaitRequest
	// WaitResponse is wire.WaitResponse: a 200 answer to POST /wait-for-work.
	WaitResponse = wire.WaitResponse
	// CheckPathsRequest is wire.CheckPathsRequest: the body of POST
	// /check-paths.
	CheckPathsRequest = wire.CheckPathsRequest
	// CheckPathsAnswer is wire.CheckPathsAnswer: a 200 answer to POST
	// /check-paths.
	CheckPathsAnswer = wire.CheckPathsAnswer
	// PathConflict is wire.PathConflict: one reservation that holds a path.
	PathConflict = wire.PathConflict
	// StatusError is wire.StatusError: an answer other than 200.
	StatusError = wire.StatusError
)

// See package wire for each.
const (
	MaxBodyBytes              = wire.MaxBodyBytes
	DefaultClientTimeout      = wire.DefaultClientTimeout
	MaxSessionIDBytes         = wire.MaxSessionIDBytes
	MaxTranscriptPathBytes    = wire.MaxTranscriptPathBytes
	MaxRearmSeconds           = wire.MaxRearmSeconds
	MaxLineBytes              = wire.MaxLineBytes
	ReasonSuperseded          = wire.ReasonSuperseded
	ReasonShuttingDown        = wire.ReasonShuttingDown
	DefaultCheckClientTimeout = wire.DefaultCheckClientTimeout
	MaxCheckPaths             = wire.MaxCheckPaths
	MaxPathBytes              = wire.MaxPathBytes
	MaxToolBytes              = wire.MaxToolBytes
	MaxConflicts              = wire.MaxConflicts
	ToolGitCommit             = wire.ToolGitCommit
)

// The client's errors, the same values as package wire's: errors.Is
// matches either name.
var (
	ErrNotListening   = wire.ErrNotListening
	ErrNotABridge     = wire.ErrNotABridge
	ErrConnectionLost = wire.ErrConnectionLost
)

// CheckSessionID is wire.CheckSessionID.
func CheckSessionID(id string) error { return wire.CheckSessionID(id) }

// Retire is wire.Retire: it asks the bridge on 127.0.0.1:port to retire its
// identity.
func Retire(ctx context.Context, port int, token string, req RetireRequest) (RetireResponse, error) {
	return wire.Retire(ctx, port, token, req)
}

// WaitForWork is wire.WaitForWork: it registers a waiter with the bridge on
// 127.0.0.1:port and returns its answer.
func WaitForWork(ctx context.Context, port int, token string, req WaitRequest) (WaitResponse, error) {
	return wire.WaitForWork(ctx, port, token, req)
}

// CheckPaths is wire.CheckPaths: it asks the bridge on 127.0.0.1:port
// whether another live identity holds any of req.Paths.
func CheckPaths(ctx context.Context, port int, token string, req CheckPathsRequest) (CheckPathsAnswer, error) {
	return wire.CheckPaths(ctx, port, token, req)
}
