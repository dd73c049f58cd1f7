//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// A headless `gemini -p` seated by the printed settings: its bridge finds
// the gemini process (the node its launcher relaunched), names the client,
// and a post reaches the model through bee_wait_action (as text: Gemini
// hands the model the tool's text, not its structured content); the model
// finishes the action; the run ends and leaves no bee process.
func TestGeminiHeadlessWaitClaimFinish(t *testing.T) {
	g := NewGeminiEnv(t, "geminier")
	waitClaimFinish(t, g.Env, g.seat(), "geminier", func(who Whoami, client string, run *Run) {
		if client != "Gemini CLI "+geminiVersion {
			t.Errorf("bee_whoami client = %q, want Gemini CLI %s", client, geminiVersion)
		}
		// node (npm's launcher, the run's pid) -> node (relaunched) -> bee-mcp.
		if who.ClaudePid == nil || procComm(*who.ClaudePid) != "node" || ppid(*who.ClaudePid) != run.Cmd.Process.Pid {
			t.Errorf("bee_whoami agent process = %v, want the relaunched node, child of the launcher %d", ptrStr(who.ClaudePid), run.Cmd.Process.Pid)
		}
	})
}

// A Claude Code session posts an action for the Gemini agent and awaits
// it; a `gemini -p` takes it and finishes it; the Claude session hears the
// outcome from bee_await_action.
func TestClaudePostsForGeminiAndAwaits(t *testing.T) {
	g := NewGeminiEnv(t, "geminier")
	claudeAwaitsSeat(t, g.Env, g.seat(), "geminier")
}

// The longest wait bee serves Gemini CLI (60 s) returns normally under
// Gemini's default MCP timeout (600 s): no client-side timeout, and the
// model reads the empty result (as text: the same JSON), whose next step
// says bee cannot wake it.
func TestGeminiFullLengthWait(t *testing.T) {
	g := NewGeminiEnv(t, "geminier")
	g.Model.Push(
		func(*ModelRequest) Turn {
			return Turn{Tool: geminiTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 60}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "no work"} },
	)
	run := g.Prompt("Wait for work once.")
	waitReq := g.Model.MustToolCall(geminiTool("bee_wait_action"), 1, 90*time.Second)
	if !strings.Contains(string(waitReq.Raw), "bee cannot wake a Gemini CLI session") {
		t.Error("bee_wait_action's description does not tell the Gemini model that bee cannot wake it")
	}
	resReq, tr := g.Model.MustResult(waitReq, 100*time.Second)
	took := resReq.At.Sub(waitReq.Answered)
	t.Logf("a 60 s wait under gemini: result after %v: %.300s", took, tr.Text)
	var p struct {
		Page
		Next string `json:"next"`
	}
	if tr.IsError || tr.JSON(&p) != nil || len(p.Records) != 0 || !strings.Contains(p.Next, "bee cannot wake this Gemini CLI session") {
		t.Errorf("the wait's result = %q, want an empty page whose next says bee cannot wake the session", tr.Text)
	}
	if took < 55*time.Second || took > 75*time.Second {
		t.Errorf("the wait took %v, want about 60 s", took)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("gemini -p: %v", err)
	}
	expectNoBridge(t, g.Env, 10*time.Second)
}

// Interactive Gemini CLI in tmux: /clear keeps the bridge and runs the
// SessionStart hook with source "clear", which bee-hook turns into a new
// identity (the old one's claim goes back on the board); /quit leaves no
// bridge.
func TestGeminiInteractiveClearAndExit(t *testing.T) {
	g := NewGeminiEnv(t, "geminier")
	x := g.StartTmuxPlain(geminiBin)
	if !x.WaitScreen(90*time.Second, "Type your message") {
		t.Fatal("the Gemini TUI never showed its prompt")
	}
	g.Model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: geminiTool("bee_whoami")} },
		func(*ModelRequest) Turn {
			return Turn{Tool: geminiTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 40}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "claimed-one"} },
	)
	x.Submit("Check in with bee and take the next action.")
	_, tr := g.Model.MustResult(g.Model.MustToolCall(geminiTool("bee_whoami"), 1, 60*time.Second), 30*time.Second)
	who1, _ := WhoamiIn(t, tr)
	if who1.ClaudePid == nil || ppid(*who1.ClaudePid) != x.Pid {
		t.Errorf("bee_whoami agent process = %v, want the node the launcher %d relaunched", ptrStr(who1.ClaudePid), x.Pid)
	}
	waitReq := g.Model.MustToolCall(geminiTool("bee_wait_action"), 1, 30*time.Second)
	time.Sleep(time.Second)
	posted := g.Post("e2e: gemini claims it", "claimed before /clear", "--to", "geminier")
	if _, tr := g.Model.MustResult(waitReq, 30*time.Second); !strings.Contains(tr.Text, posted.IDString()) {
		t.Fatalf("bee_wait_action: %s, want %s", tr.Text, posted.IDString())
	}
	if !x.WaitScreen(30*time.Second, "claimed-one") {
		t.Fatal("turn 1 did not finish on screen")
	}

	x.Submit("/clear")
	if !eventually(30*time.Second, func() bool {
		rec := g.Show(posted.IDString())
		return rec.State == "open" && rec.Holder == ""
	}) {
		t.Errorf("the old identity's claim is not back on the board after /clear: %+v", g.Show(posted.IDString()))
	}
	var cleared *HookInput
	for _, in := range g.RecordedHookInputs() {
		if in.Source == "clear" {
			in := in
			cleared = &in
		}
	}
	if cleared == nil {
		t.Fatalf("no SessionStart hook with source clear ran: %+v", g.RecordedHookInputs())
	}
	if !strings.Contains(readFile(g.HookLog), "retired "+who1.Identity) {
		t.Errorf("bee-hook did not retire %s: %s", who1.Identity, readFile(g.HookLog))
	}
	g.Model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: geminiTool("bee_whoami")} },
		func(*ModelRequest) Turn { return Turn{Text: "after-clear"} },
	)
	// The TUI redraws after /clear; text typed meanwhile is lost. (A "?"
	// in the input opens Gemini's shortcuts panel instead.)
	if !x.WaitScreen(30*time.Second, "Type your message") {
		t.Fatal("no prompt after /clear")
	}
	time.Sleep(time.Second)
	x.Submit("Tell me who I am now.")
	_, tr = g.Model.MustResult(g.Model.MustToolCall(geminiTool("bee_whoami"), 2, 60*time.Second), 30*time.Second)
	who2, _ := WhoamiIn(t, tr)
	t.Logf("before /clear %s, after %s (session %s)", who1.Identity, who2.Identity, who2.SessionID)
	if who2.Identity == who1.Identity {
		t.Errorf("/clear kept the identity %s", who1.Identity)
	}
	if who2.SessionID != cleared.SessionID {
		t.Errorf("after /clear the bridge serves session %q, want the new session %q", who2.SessionID, cleared.SessionID)
	}
	if who2.ClaudePid == nil || who1.ClaudePid == nil || *who2.ClaudePid != *who1.ClaudePid {
		t.Errorf("the agent process changed across /clear: %v -> %v", ptrStr(who1.ClaudePid), ptrStr(who2.ClaudePid))
	}

	x.Submit("/quit")
	if !eventually(20*time.Second, x.Dead) {
		t.Error("the Gemini TUI did not exit")
	}
	expectNoBridge(t, g.Env, 10*time.Second)
	if files := g.RunFiles(); len(files) != 0 {
		t.Errorf("run files left after /quit: %v", files)
	}
}
