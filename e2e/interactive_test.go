//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// Scenario b: an interactive session in tmux with the bee bridge and the
// SessionStart/clear hook. The model claims an action; the user types
// /clear; the hook makes the bridge retire: a new identity bound to the new
// session id, and the old identity's claim back on the board. Then /exit
// leaves no run file, no claim and no bridge process.
func TestInteractiveClearRetires(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	x := e.StartTmux(claudeBin, "--settings", e.WriteSettings(true))
	if !x.WaitReady(45 * time.Second) {
		t.Fatal("the interactive CLI never showed its prompt")
	}

	// Turn 1: check in, wait, get the action a person posts.
	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		Call(toolWait, map[string]any{"timeoutSeconds": 40}),
		Say("claimed-one"),
	)
	x.Submit("Check in with bee and take the next action.")
	whoReq1 := e.MustToolCall(toolWhoami, 1, 60*time.Second)
	who1 := e.WhoamiOf(whoReq1)
	t.Logf("before /clear: %+v", who1)
	if who1.ClaudePid == nil || *who1.ClaudePid != x.Pid {
		t.Errorf("bee_whoami claudePid = %v, want the claude process %d", ptrStr(who1.ClaudePid), x.Pid)
	}
	if who1.SessionID != whoReq1.SessionID {
		t.Errorf("bee_whoami sessionId = %q, want the CLI's session %q", who1.SessionID, whoReq1.SessionID)
	}

	waitReq1 := e.MustToolCall(toolWait, 1, 30*time.Second)
	time.Sleep(time.Second)
	posted := e.Post("e2e: survives clear", "claimed before /clear, open after it")
	_, tr := e.ToolResult(waitReq1, 30*time.Second)
	var page Page
	if !parseResult(t, "bee_wait_action", tr, &page) || len(page.Records) != 1 {
		t.Fatalf("bee_wait_action: want one record, got %s", tr.Text)
	}
	if got := page.Records[0]; got.IDString() != posted.IDString() || got.Holder != who1.Identity {
		t.Fatalf("bee_wait_action gave %+v, want %s held by %s", got, posted.IDString(), who1.Identity)
	}
	if !x.WaitScreen(30*time.Second, "claimed-one") {
		t.Fatal("turn 1 did not finish on screen")
	}
	if rec := e.Show(posted.IDString()); rec.State != "claimed" || rec.Holder != who1.Identity {
		t.Fatalf("before /clear the board shows %s %s by %q, want claimed by %s", rec.IDString(), rec.State, rec.Holder, who1.Identity)
	}
	if agents := e.Agents(); len(agents) != 1 || agents[0].Identity != who1.Identity || len(agents[0].Holding) != 1 || agents[0].Holding[0] != posted.IDString() {
		t.Errorf("bee agents before /clear: %+v, want %s holding %s", agents, who1.Identity, posted.IDString())
	}

	// /clear: the hook reaches the bridge, which retires its identity.
	logOff := len(e.BridgeLogText())
	x.Type("/clear")
	if !x.WaitScreen(10*time.Second, "/clear") {
		t.Fatal("typed /clear but the screen does not show it")
	}
	time.Sleep(150 * time.Millisecond)
	clearAt := time.Now()
	x.Key("Enter")
	line, seenAt, ok := e.WaitBridgeLog(logOff, 20*time.Second, "retired")
	if !ok {
		t.Fatalf("the bridge logged no retire within 20 s of /clear")
	}
	t.Logf("/clear -> bridge log %q after %v", strings.TrimSpace(line), seenAt.Sub(clearAt))
	if !strings.Contains(line, who1.Identity) {
		t.Errorf("the retire line does not name the old identity %s", who1.Identity)
	}
	if !eventually(10*time.Second, func() bool {
		rec := e.Show(posted.IDString())
		return rec.State == "open" && rec.Holder == ""
	}) {
		rec := e.Show(posted.IDString())
		t.Errorf("after /clear the action is %s held by %q, want open again", rec.State, rec.Holder)
	} else {
		t.Logf("after /clear: action %s is open again", posted.IDString())
	}
	// The recorder hook runs beside bee-hook and may finish after it.
	var clearInput HookInput
	eventually(10*time.Second, func() bool {
		for _, in := range e.RecordedHookInputs() {
			if in.Source == "clear" {
				clearInput = in
			}
		}
		return clearInput.SessionID != ""
	})
	if clearInput.SessionID == "" {
		t.Errorf("the recorder hook saw no SessionStart/clear input: %q", readFile(e.HookInputs()))
	}
	t.Logf("bee-hook stderr: %s", strings.TrimSpace(readFile(e.HookLog)))

	// Turn 2 (new conversation): a new identity for the new session, which
	// can claim the action the old identity gave back.
	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		Call(toolWait, map[string]any{"timeoutSeconds": 10}),
		Say("claimed-two"),
	)
	x.Submit("Who am I now? Then take the next action.")
	whoReq2 := e.MustToolCall(toolWhoami, 2, 60*time.Second)
	who2 := e.WhoamiOf(whoReq2)
	t.Logf("after /clear: %+v (hook session_id %s, request session %s)", who2, clearInput.SessionID, whoReq2.SessionID)
	if who2.Identity == who1.Identity {
		t.Errorf("the identity did not change across /clear: %s", who2.Identity)
	}
	if who2.Agent != who1.Agent {
		t.Errorf("agent changed across /clear: %q -> %q", who1.Agent, who2.Agent)
	}
	if who2.ClaudePid == nil || *who2.ClaudePid != x.Pid {
		t.Errorf("after /clear claudePid = %v, want %d", ptrStr(who2.ClaudePid), x.Pid)
	}
	if who2.Pid != who1.Pid {
		t.Errorf("the bridge process changed across /clear: pid %d -> %d (it should live on)", who1.Pid, who2.Pid)
	}
	if whoReq2.SessionID == whoReq1.SessionID {
		t.Errorf("the CLI kept session %s across /clear", whoReq2.SessionID)
	}
	if who2.SessionID != whoReq2.SessionID || (clearInput.SessionID != "" && who2.SessionID != clearInput.SessionID) {
		t.Errorf("after /clear sessionId = %q, want the new session %q (hook said %q)", who2.SessionID, whoReq2.SessionID, clearInput.SessionID)
	}
	agents := e.Agents()
	if len(agents) != 1 || agents[0].Identity != who2.Identity || agents[0].SessionID != who2.SessionID {
		t.Errorf("bee agents after /clear: %+v, want only %s in session %s", agents, who2.Identity, who2.SessionID)
	}
	waitReq2 := e.MustToolCall(toolWait, 2, 30*time.Second)
	_, tr = e.ToolResult(waitReq2, 30*time.Second)
	page = Page{}
	if !parseResult(t, "bee_wait_action", tr, &page) || len(page.Records) != 1 {
		t.Fatalf("bee_wait_action after /clear: want the given-back action, got %s", tr.Text)
	}
	if got := page.Records[0]; got.IDString() != posted.IDString() || got.Holder != who2.Identity {
		t.Errorf("bee_wait_action after /clear gave %+v, want %s held by %s", got, posted.IDString(), who2.Identity)
	}
	if !x.WaitScreen(30*time.Second, "claimed-two") {
		t.Fatal("turn 2 did not finish on screen")
	}

	// /exit: the bridge departs (claim back), removes its run file, ends.
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectCleanEnd(t, e)
	if rec := e.Show(posted.IDString()); rec.State != "open" || rec.Holder != "" {
		t.Errorf("after /exit the action is %s held by %q, want open", rec.State, rec.Holder)
	}
}

// Scenario c: Esc while bee_wait_action waits. The CLI cancels the call; the
// bridge ends the wait at once and claims nothing; the next turn goes on
// well inside the wait's 45 s bound.
func TestInteractiveEscCancelsWait(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	x := e.StartTmux(claudeBin, "--settings", e.WriteSettings(false))
	if !x.WaitReady(45 * time.Second) {
		t.Fatal("the interactive CLI never showed its prompt")
	}

	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		Call(toolWait, map[string]any{"timeoutSeconds": 45}),
	)
	x.Submit("Wait for a bee action.")
	who := e.WhoamiOf(e.MustToolCall(toolWhoami, 1, 60*time.Second))
	waitReq := e.MustToolCall(toolWait, 1, 30*time.Second)
	time.Sleep(1500 * time.Millisecond) // the wait is running in the bridge

	logOff := len(e.BridgeLogText())
	escAt := time.Now()
	x.Key("Escape")
	line, seenAt, ok := e.WaitBridgeLog(logOff, 10*time.Second, "cancel")
	if !ok {
		t.Errorf("the bridge logged no cancel within 10 s of Esc; its log since: %q", e.BridgeLogText()[logOff:])
	} else {
		t.Logf("Esc -> bridge log %q after %v", strings.TrimSpace(line), seenAt.Sub(escAt))
	}
	if !x.WaitScreen(10*time.Second, "Interrupted") {
		t.Errorf("the screen does not show the interrupt")
	}

	// Posted after the cancel: nobody may claim it (the cancelled wait is over).
	posted := e.Post("e2e: after cancel", "must stay open")
	time.Sleep(2 * time.Second)
	if rec := e.Show(posted.IDString()); rec.State != "open" || rec.Holder != "" {
		t.Errorf("an action posted after the cancel is %s held by %q, want open", rec.State, rec.Holder)
	}
	for _, r := range e.List() {
		if r.Holder == who.Identity || r.State == "claimed" {
			t.Errorf("after the cancel %s is %s by %q", r.IDString(), r.State, r.Holder)
		}
	}

	// The next turn: the interrupted call comes back as a rejected tool
	// result; the bridge serves the same identity and can claim again.
	var cancelled ToolResult
	e.API.Push(
		func(r *APIRequest) Turn {
			for _, tr := range r.ToolResults() {
				if tr.ToolUseID == waitReq.ToolUseID {
					cancelled = tr
				}
			}
			return Turn{Tool: toolWhoami, Input: map[string]any{}}
		},
		Call(toolWait, map[string]any{"timeoutSeconds": 10}),
		Say("next-turn-done"),
	)
	x.Submit("Carry on.")
	who2 := e.WhoamiOf(e.MustToolCall(toolWhoami, 2, 30*time.Second))
	if who2.Identity != who.Identity {
		t.Errorf("Esc changed the identity: %s -> %s", who.Identity, who2.Identity)
	}
	waitReq2 := e.MustToolCall(toolWait, 2, 30*time.Second)
	_, tr := e.ToolResult(waitReq2, 30*time.Second)
	var page Page
	if parseResult(t, "bee_wait_action", tr, &page) {
		if len(page.Records) != 1 || page.Records[0].IDString() != posted.IDString() || page.Records[0].Holder != who.Identity {
			t.Errorf("the next wait gave %s, want %s claimed by %s", tr.Text, posted.IDString(), who.Identity)
		}
	}
	if !x.WaitScreen(30*time.Second, "next-turn-done") {
		t.Fatal("the next turn did not finish on screen")
	}
	elapsed := time.Since(escAt)
	t.Logf("Esc -> next turn done: %v (the cancelled wait's bound was 45 s); the CLI sent the cancelled call back as is_error=%v %.120q",
		elapsed, cancelled.IsError, cancelled.Text)
	if elapsed > 30*time.Second {
		t.Errorf("the next turn took %v after Esc: the cancelled wait held things up", elapsed)
	}
	if cancelled.ToolUseID == "" {
		t.Errorf("the next request did not carry the cancelled call's tool_result")
	}

	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectCleanEnd(t, e)
}

// Esc after bee_wait_action's answer has reached the CLI (the model is
// thinking about the claim): the claim is the model's, so it must stay
// held. This pins what the real client sends for a call it has already
// answered, since the bridge treats a cancel that crosses an answer on the
// wire as "that answer was discarded".
func TestInteractiveEscAfterClaimKeepsIt(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	x := e.StartTmux(claudeBin, "--settings", e.WriteSettings(false))
	if !x.WaitReady(45 * time.Second) {
		t.Fatal("the interactive CLI never showed its prompt")
	}
	posted := e.Post("e2e: claim then Esc", "the model receives this, then the user presses Esc")

	thinking := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		Call(toolWait, map[string]any{"timeoutSeconds": 10}),
		func(*APIRequest) Turn {
			// The model "thinks" about the claim until the test is done.
			close(thinking)
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			return Turn{Text: "thought about it"}
		},
	)
	x.Submit("Take a bee action.")
	who := e.WhoamiOf(e.MustToolCall(toolWhoami, 1, 60*time.Second))
	_, tr := e.ToolResult(e.MustToolCall(toolWait, 1, 30*time.Second), 30*time.Second)
	var page Page
	if !parseResult(t, "bee_wait_action", tr, &page) || len(page.Records) != 1 || page.Records[0].IDString() != posted.IDString() {
		t.Fatalf("the wait did not hand over %s: %s", posted.IDString(), tr.Text)
	}
	<-thinking
	time.Sleep(500 * time.Millisecond)
	logOff := len(e.BridgeLogText())
	x.Key("Escape")
	if !x.WaitScreen(10*time.Second, "Interrupted") {
		t.Errorf("the screen does not show the interrupt")
	}
	time.Sleep(2 * time.Second) // anything the CLI sends for the answered call arrives by now
	if line, _, ok := e.WaitBridgeLog(logOff, 10*time.Millisecond, "cancel"); ok {
		t.Logf("after Esc the CLI cancelled a call already answered: %q", strings.TrimSpace(line))
	} else {
		t.Logf("after Esc the CLI sent no cancel for the answered call")
	}
	if rec := e.Show(posted.IDString()); rec.State != "claimed" || rec.Holder != who.Identity {
		t.Errorf("after Esc the claimed action is %s held by %q, want claimed by %s", rec.State, rec.Holder, who.Identity)
	}

	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectCleanEnd(t, e)
}
