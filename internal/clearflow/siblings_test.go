package clearflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

// spawn has the stand-in claude start a second bee-mcp with env added to
// the first one's, waits until it holds the run file, and returns its pid.
func (s *session) spawn(env []string) int {
	s.t.Helper()
	errFile := filepath.Join(filepath.Dir(s.runDir), "second-bridge.stderr")
	line, err := json.Marshal(hookCommand{Spawn: true, Env: env, Stderr: errFile})
	require.NoError(s.t, err)
	_, err = s.ctl.Write(append(line, '\n'))
	require.NoError(s.t, err)
	var got struct {
		BridgePid int
		Err       string
	}
	s.answer(&got)
	require.Empty(s.t, got.Err)
	s.secondPID = got.BridgePid
	require.Eventually(s.t, func() bool {
		e, err := runfile.Read(s.runDir, s.claudePID)
		return err == nil && e.PID == got.BridgePid
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "the second bridge never wrote its run file; its stderr: %s", readFile(errFile))
	return got.BridgePid
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// The plugin's server and a project's server both run under one claude:
// the newer takes the run file, and the older, launched differently, keeps
// serving its still-connected client instead of ending (it used to exit
// within 2 s, leaving its client without a server); /clear now retires
// only the newer bridge's identity.
func TestBridge_SiblingServerKeepsServing(t *testing.T) {
	t.Parallel()
	s := start(t, "board")
	rec := s.postAndClaim()
	before := s.whoami()

	s.spawn([]string{"CLAUDE_PLUGIN_ROOT=/plugins/bee"})
	// The older bridge checks its run file every 20 ms (BEE_WATCH_EVERY):
	// a reconnect's older bridge ends within a few checks (see
	// TestBridge_EndsWhenRunFileTakenOver); a sibling does not.
	time.Sleep(25 * 20 * time.Millisecond)
	_, err := os.Stat(s.exitFile)
	require.True(t, os.IsNotExist(err), "the older bridge still runs")

	// Still serving, under the same identity, still holding its claim.
	require.Equal(t, before.Identity, s.whoami().Identity)
	state, holder := s.boardState(rec.ID)
	require.Equal(t, actions.Claimed, state)
	require.Equal(t, before.Identity, holder)
	r := s.tool("bee_finish_action", map[string]any{"id": rec.ID, "result": "done by the older bridge"})
	require.False(t, r.IsError, r.Text())

	// /clear reaches the newer bridge, which holds the run file.
	h := s.hook(`{"session_id":"after-clear","source":"clear"}`)
	require.Contains(t, h.Stderr, "retired ")
	require.NotContains(t, h.Stderr, before.Identity)
	require.Equal(t, before.Identity, s.whoami().Identity)
}
