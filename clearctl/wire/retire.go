package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/tractat-us/bee/identity"
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

// DefaultClientTimeout bounds Retire when its ctx has no deadline. It is
// longer than the bridge's own bound on a retire (clearctl's
// DefaultAnswerWithin, 5 s) so the bridge's answer (200, 202 or 500)
// arrives before the client gives up.
const DefaultClientTimeout = 8 * time.Second

const (
	// MaxSessionIDBytes bounds a RetireRequest's session_id. Claude Code's
	// session ids are UUIDs (36 bytes).
	MaxSessionIDBytes = 128
	// MaxTranscriptPathBytes bounds a RetireRequest's transcript_path.
	MaxTranscriptPathBytes = 4096
)

// Validate reports why the bridge must not record req: an error that names
// the field. The session id is shown to people (bee agents) and logged, so
// it is held to what Claude Code sends: at most [MaxSessionIDBytes] of
// ASCII letters, digits, '.', '_', ':' and '-'. The transcript path is at
// most [MaxTranscriptPathBytes] of UTF-8 without control characters. Both
// may be empty.
func (req RetireRequest) Validate() error {
	if err := CheckSessionID(req.SessionID); err != nil {
		return err
	}
	p := req.TranscriptPath
	if len(p) > MaxTranscriptPathBytes {
		return fmt.Errorf("transcript_path is %d bytes, more than %d", len(p), MaxTranscriptPathBytes)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("transcript_path is not valid UTF-8")
	}
	for _, r := range p {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return fmt.Errorf("transcript_path holds the control character %U", r)
		}
	}
	return nil
}

// CheckSessionID reports why id cannot be a session_id (see Validate); ""
// is allowed.
func CheckSessionID(id string) error {
	if len(id) > MaxSessionIDBytes {
		return fmt.Errorf("session_id is %d bytes, more than %d", len(id), MaxSessionIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !sessionIDByte(c) {
			return fmt.Errorf("session_id holds %q at byte %d: only ASCII letters, digits, '.', '_', ':' and '-' are allowed", c, i)
		}
	}
	return nil
}

func sessionIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
}

// Retire asks the bridge listening on 127.0.0.1:port to retire its identity,
// authenticating with token, and returns the bridge's answer.
//
// The token goes only in the Authorization header; it is never part of the
// URL, a log line or an error. If ctx has no deadline, the call is bounded by
// DefaultClientTimeout. Nothing but 127.0.0.1:port is ever connected to.
//
// Errors:
//   - nothing listening on the port: an error wrapping both ErrNotListening
//     and the connect error;
//   - any answer but 200: a *StatusError (202: still running, and will
//     complete on its own; 401: wrong token; 500: the retire failed; 503:
//     the bridge is closing or busy);
//   - a 200 whose body is not a RetireResponse naming two different
//     identities: an error wrapping ErrNotABridge;
//   - ctx ending first: an error wrapping ctx's error;
//   - port outside 1..65535 or an empty token: an error, and no request.
func Retire(ctx context.Context, port int, token string, req RetireRequest) (RetireResponse, error) {
	var none RetireResponse
	if err := checkTarget("retire", port, token); err != nil {
		return none, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultClientTimeout)
		defer cancel()
	}
	a, addr, err := post(ctx, port, token, RetirePath, req)
	switch {
	case errors.Is(err, errRefused):
		return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
	case errors.Is(err, ErrNotABridge):
		return none, fmt.Errorf("retire: %w", err)
	case err != nil:
		return none, fmt.Errorf("retire: post to bridge on %s: %w", addr, err)
	case a.code != 200:
		return none, &StatusError{Code: a.code, Body: errorText(a.body)}
	}
	var out RetireResponse
	if err := json.Unmarshal(a.body, &out); err != nil {
		return none, fmt.Errorf("retire: %w: %w", ErrNotABridge, err)
	}
	if !identity.IsID(out.Retired) || !identity.IsID(out.Current) || out.Retired == out.Current {
		return none, fmt.Errorf("retire: %w: %s", ErrNotABridge, errorText(a.body))
	}
	return out, nil
}
