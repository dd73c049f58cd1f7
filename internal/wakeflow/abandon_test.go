package wakeflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/bridgetest"
	"github.com/tractat-us/bee/internal/testtime"
)

// A wait whose client abandoned it without a cancel claims an action for
// nobody. The session is not left holding it silently: RemindAfter after
// the turn's end the waiter wakes the session with a line naming it, and
// the woken model's bee_wait_action gets it at once. Real bridge, real
// hook, real board file.
func TestWake_AbandonedWaitRemindsTheSession(t *testing.T) {
	t.Parallel()
	s := start(t, "BEE_REMIND_AFTER=300ms")
	b := s.openBoard()
	rec := s.claimForNobody(b)
	turnEnded := time.Now()
	s.waiter("w1")
	e := s.hookExit("w1", 10*time.Second)
	require.Equal(t, 2, e.Exit, "stderr: %s", e.Stderr)
	require.Contains(t, e.Stderr, "action "+rec.ID+" ")
	require.Contains(t, e.Stderr, "still yours")
	require.Contains(t, e.Stderr, "call bee_wait_action")
	took := e.At.Sub(turnEnded)
	require.GreaterOrEqual(t, took, 300*time.Millisecond, "not before the bound")
	require.Less(t, took, testtime.Bound(5*time.Second), "woken within the bound, with slack for a busy machine")

	start := time.Now()
	r := s.tool("bee_wait_action", map[string]any{"timeoutSeconds": 30})
	require.False(t, r.IsError, r.Text())
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "the reminded claim comes back at once")
	var page actions.Page
	require.NoError(t, json.Unmarshal(r.StructuredContent, &page))
	require.Len(t, page.Records, 1)
	require.Equal(t, rec.ID, page.Records[0].ID)
}

// A reminded claim that no bee_wait_action takes goes back to the board
// within RemindAfter + HandoverWithin of the turn's end.
func TestWake_AbandonedClaimGoesBackToTheBoard(t *testing.T) {
	t.Parallel()
	s := start(t, "BEE_REMIND_AFTER=300ms", "BEE_HANDOVER_WITHIN=300ms")
	b := s.openBoard()
	rec := s.claimForNobody(b)
	turnEnded := time.Now()
	s.waiter("w1")
	require.Equal(t, 2, s.hookExit("w1", 10*time.Second).Exit)
	require.Eventually(t, func() bool {
		r, err := b.Get(t.Context(), rec.ID)
		return err == nil && r.State == actions.Open
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "the claim nobody took back goes back to the board")
	require.Less(t, time.Since(turnEnded), testtime.Bound(5*time.Second), "within the bounds, with slack for a busy machine")
}

// claimForNobody posts an action and has a bee_wait_action claim it for a
// client that has given up on the call without a cancel (Claude Code's
// idle timeout ended the turn): the answer is written, and the test,
// playing that client, acts on nothing in it.
func (s *session) claimForNobody(b *board.Board) actions.Record {
	s.t.Helper()
	rec, err := b.Post(s.t.Context(), "user:alice", actions.Draft{To: "waketest", Title: "claimed for nobody"})
	require.NoError(s.t, err)
	s.nextID++
	s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 30}, nil))
	dropped := s.mcp.DecodeResult(s.mcp.Await(s.nextID, 10*time.Second))
	require.Contains(s.t, string(dropped.StructuredContent), `"`+rec.ID+`"`, "the wait claimed it")
	return rec
}
