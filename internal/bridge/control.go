package bridge

import (
	"errors"
	"time"

	"github.com/tractat-us/bee/identity"
)

// The bridge's side of the control channel, in its own terms: the channel's
// wire types belong to clearctl, and bee-mcp adapts between the two at its
// edge, so that this package does not depend on the transport that reaches
// it.

// A RetireRequest names the Claude Code session that /clear started. Both
// fields are optional.
type RetireRequest struct {
	SessionID      string
	TranscriptPath string
}

// A Retirement is what Retire did: Retired is the old identity, Current the
// one the session carries on under.
type Retirement struct {
	Retired identity.ID
	Current identity.ID
}

// A WaitRequest is one waiter's registration. Every field is optional.
type WaitRequest struct {
	// PID is the waiter's process, for the log.
	PID int
	// HookEventName is the hook event that started the waiter, for the log.
	HookEventName string
	// Rearm is how long to wait before answering with the RearmLine wake;
	// 0 means never.
	Rearm time.Duration
}

// A WakeAnswer is WaitForWork's answer. Wake true means: show Line to the
// model and start a turn. Wake false means: end without waking; Reason
// says why (ReasonSuperseded, ReasonShuttingDown, ReasonGone, or a
// sentence).
type WakeAnswer struct {
	Wake   bool
	Line   string
	Reason string
}

// Reasons a WakeAnswer gives for not waking. The control channel's wire
// carries the same texts (clearctl.ReasonSuperseded,
// clearctl.ReasonShuttingDown), which bee-hook acts on.
const (
	// ReasonSuperseded: a newer waiter of the same session took this one's
	// place.
	ReasonSuperseded = "superseded"
	// ReasonShuttingDown: the bridge is ending; the waiter should look for
	// a newer one.
	ReasonShuttingDown = "shutting down"
	// ReasonGone is what a waiter whose caller went away without a wake is
	// answered (nobody reads it): its hook was killed, or timed out.
	ReasonGone = "waiter gone"
)

// ErrShuttingDown is the cause a caller gives the context of WaitForWork
// when it ends it because the bridge is shutting down (the control channel
// is closing): the waiter is then answered ReasonShuttingDown rather than
// taken for a waiter that went away.
var ErrShuttingDown = errors.New("the bridge is shutting down")
