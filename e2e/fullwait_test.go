//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// The longest wait bee serves Claude Code (60 s) returns normally under
// Claude Code's default tool timeouts, as TestCodexFullLengthWait and
// TestGeminiFullLengthWait show for the other clients.
func TestClaudeFullLengthWait(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	e.API.Push(Call(toolWait, map[string]any{"timeoutSeconds": 60}), Say("no work"))
	run := e.StartHeadless(claudeBin, "Wait for work once.", "--allowedTools", "mcp__bee")
	waitReq := e.MustToolCall(toolWait, 1, 60*time.Second)
	resReq, tr := e.ToolResult(waitReq, 90*time.Second)
	took := resReq.At.Sub(waitReq.Answered)
	t.Logf("a 60 s wait under claude: result after %v: %.200s", took, tr.Text)
	var page Page
	if parseResult(t, "bee_wait_action", tr, &page) && len(page.Records) != 0 {
		t.Errorf("the wait returned records with nothing posted: %s", tr.Text)
	}
	if took < 55*time.Second || took > 75*time.Second {
		t.Errorf("the wait took %v, want about 60 s", took)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	expectCleanEnd(t, e)
}
