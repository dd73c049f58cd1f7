package clearflow

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The stand-in claude's names as Codex CLI and Gemini CLI: the rule finds
// each by its command name as it finds claude (a Gemini CLI is a node that
// runs bin/gemini; the rule's tests in ancestry cover that).
const (
	standInCodex  = "codex"
	standInGemini = "gemini"
)

// Under Gemini CLI, /clear keeps the bridge and the SessionStart hook with
// source "clear" retires its identity, as under Claude Code (measured with
// Gemini CLI 0.61.0).
func TestClear_Gemini(t *testing.T) {
	s := startAs(t, "none", standInGemini)
	before := s.whoami()
	require.NotNil(t, before.ClaudePID, "the bridge found no gemini process")
	require.Equal(t, s.claudePID, *before.ClaudePID)

	r := s.hook(`{"session_id":"gemini-2","transcript_path":"/tmp/g.jsonl","hook_event_name":"SessionStart","source":"clear"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout, "Gemini CLI parses a hook's stdout as JSON: bee-hook prints nothing there")
	require.Contains(t, r.Stderr, "retired "+before.Identity)
	after := s.whoami()
	require.NotEqual(t, before.Identity, after.Identity)
	require.Equal(t, "gemini-2", after.SessionID)
}

// Under Codex CLI the bridge finds its codex process but writes no run
// file: one Codex app-server daemon serves every TUI session of a
// CODEX_HOME, so a file keyed by its pid would let one session's hook
// reach another's bridge. A /clear hook there finds nothing to retire and
// says so; Codex gives the new thread a bridge of its own.
func TestCodex_NoRunFile(t *testing.T) {
	s := startAs(t, "none", standInCodex)
	before := s.whoami()
	require.NotNil(t, before.ClaudePID, "the bridge found no codex process")
	require.Equal(t, s.claudePID, *before.ClaudePID)
	// The bridge answered, so its start is done; a run file would have
	// been written within milliseconds of it.
	require.Never(t, func() bool {
		_, err := os.Stat(s.runFile())
		return err == nil
	}, 2*time.Second, 20*time.Millisecond, "a run file under Codex")

	r := s.hook(`{"session_id":"codex-2","hook_event_name":"SessionStart","source":"clear"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, "nothing to retire (under Codex CLI each thread gets a bridge of its own")
	require.Equal(t, before.Identity, s.whoami().Identity)
}
