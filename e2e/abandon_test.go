//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// The abandoned wait through the real Claude Code, with the waiter armed.
// Its idle watchdog set low, and bee's progress slowed to 25 s so that the
// watchdog's 30 s tick finds the call silent, Claude Code gives up on a
// bee_wait_action without a cancel and ends the turn, and its Stop waiter
// registers while the wait runs on. An action posted then either wakes the
// session at once (the waiter claims it), or is claimed by the abandoned
// wait for nobody and the session is woken about it RemindAfter later.
// Either way the woken model's bee_wait_action gets it, and it ends done:
// never held silently.
func TestWakeAbandonedWait(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.Vars = append(e.Vars, "CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT=3000", "BEE_PROGRESS_INTERVAL=25s", "BEE_REMIND_AFTER=5s")
	e.AddBeeWithCLI()
	x := e.StartWakeSession("abandon", e.WriteWakeSettings())
	e.waitArmed(1, 30*time.Second) // the SessionStart waiter

	e.API.Push(Call(toolWait, map[string]any{"timeoutSeconds": 60}), Say("the wait gave up"))
	x.Submit("Wait for a bee action.")
	waitReq := e.MustToolCall(toolWait, 1, 60*time.Second)
	_, tr := e.ToolResult(waitReq, 50*time.Second)
	if !tr.IsError {
		t.Fatalf("the wait was not abandoned by the idle watchdog: %.300s", tr.Text)
	}
	if !x.WaitScreen(30*time.Second, "the wait gave up") {
		t.Fatal("the turn after the abandoned wait did not finish on screen")
	}

	e.takeAndFinish(toolWait, toolFinish, "done-after-abandon")
	before := e.lastN()
	posted := time.Now()
	rec := e.Post("e2e: after an abandoned wait", "someone must take this")
	req, ok := e.wokenRequest(before, rec.IDString(), 45*time.Second)
	if !ok {
		t.Fatalf("%s woke no request within 45 s: held silently? %+v", rec.IDString(), e.Show(rec.IDString()))
	}
	line := req.UserText()
	if i := strings.Index(line, "bee: action "+rec.IDString()); i >= 0 {
		line = line[i:min(len(line), i+220)]
	}
	// "is waiting for": the waiter claimed it; "is still yours": the
	// abandoned wait claimed it and the session was reminded.
	t.Logf("post -> woken request #%d in %v: %q", req.N, req.At.Sub(posted), line)
	if !eventually(30*time.Second, func() bool { return e.Show(rec.IDString()).State == "done" }) {
		t.Errorf("%s is %s, want done by the woken session", rec.IDString(), e.Show(rec.IDString()).State)
	}
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
}
