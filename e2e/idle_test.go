//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// Claude Code gives up on a tool call, without a cancel, when its
// watchdog (a tick every 30 s of the call, in 2.1.328) finds no answer or
// progress for longer than CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT (ms, at least
// 1000); the wait then claims the next action for nobody. Progress every
// 2 s keeps a wait alive under a 3 s idle timeout; progress every 25 s
// (the control) lets the 30 s tick abandon it.
func TestHeadlessIdleTimeoutAndProgress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		progress  string // BEE_PROGRESS_INTERVAL; "" for bee's default
		abandoned bool
	}{
		{"progress every 25 s", "25s", true},
		{"default", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEnv(t)
			e.Vars = append(e.Vars, "CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT=3000")
			if tc.progress != "" {
				e.Vars = append(e.Vars, "BEE_PROGRESS_INTERVAL="+tc.progress)
			}
			e.AddBeeWithCLI()
			e.API.Push(Call(toolWait, map[string]any{"timeoutSeconds": 45}), Say("waited"))
			run := e.StartHeadless(claudeBin, "Wait for a bee action.", "--allowedTools", "mcp__bee")
			waitReq := e.MustToolCall(toolWait, 1, 60*time.Second)
			time.Sleep(34 * time.Second) // past the watchdog's first tick
			posted := e.Post("e2e: after 34 s", "posted while the wait runs")
			resReq, tr := e.ToolResult(waitReq, 40*time.Second)
			took := resReq.At.Sub(waitReq.Answered)
			t.Logf("idle timeout 3 s, progress %q: result after %v, is_error=%v: %.200s", tc.progress, took, tr.IsError, tr.Text)
			var page Page
			got := !tr.IsError && parseResult(t, "bee_wait_action", tr, &page) && len(page.Records) == 1 && page.Records[0].IDString() == posted.IDString()
			if got == tc.abandoned {
				t.Errorf("abandoned = %v, want %v", !got, tc.abandoned)
			}
			if err := run.Wait(t, 60*time.Second); err != nil {
				t.Errorf("claude -p: %v", err)
			}
		})
	}
}
