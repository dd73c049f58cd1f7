package clearctl

import (
	"fmt"
	"unicode/utf8"
)

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
