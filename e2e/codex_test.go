//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// A headless `codex exec` seated by the printed config: its bridge finds
// the codex process, names the client, and a post reaches the model
// through bee_wait_action; the model finishes the action; the run ends and
// leaves no bee process.
func TestCodexExecWaitClaimFinish(t *testing.T) {
	c := NewCodexEnv(t, "codexer")
	waitClaimFinish(t, c.Env, c.seat(), "codexer", func(who Whoami, client string, run *Run) {
		if client != "Codex CLI "+codexVersion {
			t.Errorf("bee_whoami client = %q, want Codex CLI %s", client, codexVersion)
		}
		// node (npm's launcher, the run's pid) -> codex (native) -> bee-mcp.
		if who.ClaudePid == nil || procComm(*who.ClaudePid) != "codex" || ppid(*who.ClaudePid) != run.Cmd.Process.Pid {
			t.Errorf("bee_whoami agent process = %v (comm %q), want the native codex, child of the launcher %d",
				ptrStr(who.ClaudePid), procComm(derefOr(who.ClaudePid)), run.Cmd.Process.Pid)
		}
		if files := c.RunFiles(); len(files) != 0 {
			t.Errorf("run files under Codex: %v, want none (one codex may serve several sessions)", files)
		}
	})
}

// A Claude Code session posts an action for the Codex agent and awaits it;
// a `codex exec` takes it and finishes it; the Claude session hears the
// outcome from bee_await_action.
func TestClaudePostsForCodexAndAwaits(t *testing.T) {
	c := NewCodexEnv(t, "codexer")
	claudeAwaitsSeat(t, c.Env, c.seat(), "codexer")
}

// The longest wait bee serves Codex CLI (50 s) returns normally under
// Codex's default tool timeout: no client-side timeout, the model reads the
// empty result and what to do next, and its description said the bound.
func TestCodexFullLengthWait(t *testing.T) {
	c := NewCodexEnv(t, "codexer")
	c.Model.Push(
		func(*ModelRequest) Turn {
			return Turn{Tool: codexTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 50}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "no work"} },
	)
	start := time.Now()
	run := c.Exec("Wait for work once.")
	waitReq := c.Model.MustToolCall(codexTool("bee_wait_action"), 1, 60*time.Second)
	var offered bool
	for _, name := range waitReq.Tools {
		offered = offered || name == codexTool("bee_wait_action")
	}
	if !offered {
		t.Errorf("the request offered %v, not %s", waitReq.Tools, codexTool("bee_wait_action"))
	}
	if !strings.Contains(string(waitReq.Raw), "Under Codex CLI a wait lasts at most 50 s") {
		t.Error("bee_wait_action's description does not tell the Codex model its 50 s bound")
	}
	resReq, tr := c.Model.MustResult(waitReq, 90*time.Second)
	took := resReq.At.Sub(waitReq.Answered)
	t.Logf("a 50 s wait under codex: result after %v: %.300s", took, tr.Text)
	if tr.IsError {
		t.Errorf("the wait failed at the client: %s", tr.Text)
	}
	var p struct {
		Page
		Next string `json:"next"`
	}
	if err := tr.JSON(&p); err != nil || len(p.Records) != 0 || !strings.Contains(p.Next, "bee cannot wake this Codex CLI session") {
		t.Errorf("the wait's result = %q, want an empty page whose next says bee cannot wake the session", tr.Text)
	}
	if took < 45*time.Second || took > 58*time.Second {
		t.Errorf("the wait took %v, want about 50 s (bee's Codex bound)", took)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("codex exec: %v", err)
	}
	t.Logf("whole run: %v", time.Since(start))
	expectNoBridge(t, c.Env, 10*time.Second)
}

// Interactive Codex CLI in tmux: /clear starts a new thread, and Codex a
// new bridge for it, so the model's next bee_whoami is a new identity; the
// old thread's bridge departs (its claim goes back on the board) when Codex
// unloads the thread, and after the TUI exits no bridge is left. The unload
// delay is Codex's thread_unload_delay_secs, 60 s by default, set to 3 s
// here.
func TestCodexInteractiveClearAndExit(t *testing.T) {
	c := NewCodexEnv(t, "codexer", "thread_unload_delay_secs = 3")
	x := c.StartTmuxPlain(codexBin)
	if !x.WaitScreen(60*time.Second, "Ask Codex to do anything") {
		t.Fatal("the Codex TUI never showed its prompt")
	}
	c.Model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: codexTool("bee_whoami")} },
		func(*ModelRequest) Turn {
			return Turn{Tool: codexTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 40}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "claimed-one"} },
	)
	x.Submit("Check in with bee and take the next action.")
	_, tr := c.Model.MustResult(c.Model.MustToolCall(codexTool("bee_whoami"), 1, 60*time.Second), 30*time.Second)
	who1, _ := WhoamiIn(t, tr)
	waitReq := c.Model.MustToolCall(codexTool("bee_wait_action"), 1, 30*time.Second)
	time.Sleep(time.Second)
	posted := c.Post("e2e: codex claims it", "claimed before /clear", "--to", "codexer")
	if _, tr := c.Model.MustResult(waitReq, 30*time.Second); !strings.Contains(tr.Text, posted.IDString()) {
		t.Fatalf("bee_wait_action: %s, want %s", tr.Text, posted.IDString())
	}
	if !x.WaitScreen(30*time.Second, "claimed-one") {
		t.Fatal("turn 1 did not finish on screen")
	}
	if rec := c.Show(posted.IDString()); rec.State != "claimed" || rec.Holder != who1.Identity {
		t.Fatalf("before /clear: %s %s by %q, want claimed by %s", rec.IDString(), rec.State, rec.Holder, who1.Identity)
	}

	x.Submit("/clear")
	c.Model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: codexTool("bee_whoami")} },
		func(*ModelRequest) Turn { return Turn{Text: "after-clear"} },
	)
	time.Sleep(time.Second)
	x.Submit("Who am I now?")
	_, tr = c.Model.MustResult(c.Model.MustToolCall(codexTool("bee_whoami"), 2, 60*time.Second), 30*time.Second)
	who2, _ := WhoamiIn(t, tr)
	t.Logf("before /clear %s, after %s", who1.Identity, who2.Identity)
	if who2.Identity == who1.Identity {
		t.Errorf("/clear kept the identity %s", who1.Identity)
	}
	clearedAt := time.Now()
	if !eventually(30*time.Second, func() bool {
		rec := c.Show(posted.IDString())
		return rec.State == "open" && rec.Holder == ""
	}) {
		t.Errorf("the old identity's claim is not back on the board 30 s after /clear: %+v", c.Show(posted.IDString()))
	} else {
		t.Logf("the old thread's claim was back %v after the new thread's first turn", time.Since(clearedAt))
	}
	for _, a := range c.Agents() {
		if a.Identity == who1.Identity {
			t.Errorf("bee agents still lists the cleared identity %s", who1.Identity)
		}
	}

	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Error("the Codex TUI did not exit")
	}
	expectNoBridge(t, c.Env, 30*time.Second)
}

func derefOr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
