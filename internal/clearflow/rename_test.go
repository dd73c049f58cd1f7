package clearflow

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/runfile"
)

// claude run under another command name (a versioned binary run by its
// path): the bridge takes its parent as the claude process because
// CLAUDECODE=1, the hook finds the same one through $CLAUDE_PID, and /clear
// retires.
func TestClear_ClaudeUnderAnotherName(t *testing.T) {
	s := startAs(t, "none", versionedClaude)
	before := s.whoami()
	require.NotNil(t, before.ClaudePID, "the bridge found no claude process")
	require.Equal(t, s.claudePID, *before.ClaudePID)
	e, err := runfile.Read(s.runDir, s.claudePID)
	require.NoError(t, err, "run file written")
	require.Equal(t, s.bridgePID, e.PID)

	r := s.hook(`{"session_id":"after-clear","source":"clear"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, "retired "+before.Identity)
	after := s.whoami()
	require.NotEqual(t, before.Identity, after.Identity)
	require.Equal(t, "after-clear", after.SessionID)

	list := s.runHook(filepath.Join(bin, "bee-hook")+" --list", "")
	require.Contains(t, list.Stdout, "note: claude pid "+strconv.Itoa(s.claudePID)+` runs as "`+versionedClaude+`"`)
}
