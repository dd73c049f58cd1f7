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
	const title, body = "e2e: for codex", "please finish me, codex"
	c.Model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: codexTool("bee_whoami")} },
		func(*ModelRequest) Turn {
			return Turn{Tool: codexTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 40}}
		},
		func(r *ModelRequest) Turn {
			tr, _ := r.LastResult()
			id, ok := claimedID(tr)
			if !ok {
				t.Errorf("bee_wait_action returned %q, want one record", tr.Text)
				return Turn{Text: "no action came"}
			}
			return Turn{Tool: codexTool("bee_finish_action"), Input: map[string]any{"id": id, "result": "finished by codex"}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "codex is done"} },
	)
	run := c.Exec("Check in with bee, wait for the next action and finish it.")

	_, tr := c.Model.MustResult(c.Model.MustToolCall(codexTool("bee_whoami"), 1, 60*time.Second), 30*time.Second)
	who, client := WhoamiIn(t, tr)
	t.Logf("bee_whoami under codex exec: %+v client %q", who, client)
	if client != "Codex CLI "+codexVersion {
		t.Errorf("bee_whoami client = %q, want Codex CLI %s", client, codexVersion)
	}
	if who.Agent != "codexer" {
		t.Errorf("bee_whoami agent = %q, want codexer (BEE_AGENT from the config's env)", who.Agent)
	}
	// node (npm's launcher, the run's pid) -> codex (native) -> bee-mcp.
	if who.ClaudePid == nil || procComm(*who.ClaudePid) != "codex" || ppid(*who.ClaudePid) != run.Cmd.Process.Pid {
		t.Errorf("bee_whoami agent process = %v (comm %q), want the native codex, child of the launcher %d",
			ptrStr(who.ClaudePid), procComm(derefOr(who.ClaudePid)), run.Cmd.Process.Pid)
	}
	if files := c.RunFiles(); len(files) != 0 {
		t.Errorf("run files under Codex: %v, want none (one codex may serve several sessions)", files)
	}

	waitReq := c.Model.MustToolCall(codexTool("bee_wait_action"), 1, 30*time.Second)
	time.Sleep(1500 * time.Millisecond) // the call reaches the bridge and waits
	if _, _, done := c.Model.WaitResultFor(0, waitReq.CallID); done {
		t.Fatal("bee_wait_action returned before anything was posted")
	}
	postedAt := time.Now()
	posted := c.Post(title, body, "--to", "codexer")
	resReq, tr := c.Model.MustResult(waitReq, 30*time.Second)
	t.Logf("post -> tool result at the fake API: %v", resReq.At.Sub(postedAt))
	if id, ok := claimedID(tr); !ok || id != posted.IDString() {
		t.Errorf("bee_wait_action gave %q, want %s", tr.Text, posted.IDString())
	}
	if !strings.Contains(tr.Text, `"holder":"`+who.Identity+`"`) {
		t.Errorf("the claim is not held by %s: %s", who.Identity, tr.Text)
	}
	if _, tr := c.Model.MustResult(c.Model.MustToolCall(codexTool("bee_finish_action"), 1, 30*time.Second), 30*time.Second); tr.IsError {
		t.Errorf("bee_finish_action: %s", tr.Text)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("codex exec: %v", err)
	}
	if out := run.Stdout.String(); !strings.Contains(out, "codex is done") {
		t.Errorf("codex exec printed %q, want the model's last words", out)
	}
	if rec := c.Show(posted.IDString()); rec.State != "done" || rec.Result != "finished by codex" {
		t.Errorf("bee show %s: %s %v, want done with codex's result", posted.IDString(), rec.State, rec.Result)
	}
	expectNoBridge(t, c.Env, 10*time.Second)
}

// A Claude Code session posts an action for the Codex agent and awaits it;
// a `codex exec` takes it and finishes it; the Claude session hears the
// outcome from bee_await_action.
func TestClaudePostsForCodexAndAwaits(t *testing.T) {
	c := NewCodexEnv(t, "codexer")
	c.AddBeeWithCLI()
	const result = "codex built it"
	c.API.Push(
		Call(toolPost, map[string]any{"to": "codexer", "title": "e2e: build it, codex", "body": "make"}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var res struct {
				Action Record `json:"action"`
			}
			if !parseResult(t, "bee_post_action", tr, &res) {
				return Turn{Text: "post failed"}
			}
			return Turn{Tool: toolAwait, Input: map[string]any{"ids": []any{res.Action.IDValue()}, "timeoutSeconds": 60}}
		},
		Say("the lead heard"),
	)
	c.Model.Push(
		func(*ModelRequest) Turn {
			return Turn{Tool: codexTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 30}}
		},
		func(r *ModelRequest) Turn {
			tr, _ := r.LastResult()
			id, ok := claimedID(tr)
			if !ok {
				t.Errorf("codex's bee_wait_action returned %q, want the lead's action", tr.Text)
				return Turn{Text: "nothing came"}
			}
			return Turn{Tool: codexTool("bee_finish_action"), Input: map[string]any{"id": id, "result": result}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "codex finished"} },
	)
	lead := c.StartHeadless(claudeBin, "Hand the build to codexer and wait for it.", "--allowedTools", "mcp__bee")
	awaitReq := c.MustToolCall(toolAwait, 1, 60*time.Second)
	worker := c.Exec("Take the next action.")

	finReq := c.Model.MustToolCall(codexTool("bee_finish_action"), 1, 60*time.Second)
	finishedAt := time.Now()
	if _, tr := c.Model.MustResult(finReq, 30*time.Second); tr.IsError {
		t.Errorf("bee_finish_action under codex: %s", tr.Text)
	}
	resReq, tr := c.ToolResult(awaitReq, 30*time.Second)
	t.Logf("codex's finish -> the lead's await result at the API: %v", resReq.At.Sub(finishedAt))
	var got struct {
		Records []Record `json:"records"`
	}
	if parseResult(t, "bee_await_action", tr, &got) {
		if len(got.Records) != 1 || got.Records[0].State != "done" || got.Records[0].Result != result {
			t.Errorf("bee_await_action returned %+v, want the action done with %q", got.Records, result)
		}
	}
	for name, r := range map[string]*Run{"lead (claude -p)": lead, "worker (codex exec)": worker} {
		if err := r.Wait(t, 60*time.Second); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	expectNoBridge(t, c.Env, 10*time.Second)
}

// The longest wait bee serves Codex CLI (a timeoutSeconds of 60 is cut to
// 50 s) returns normally under Codex's default tool timeout: no client-side
// timeout, the model reads the empty result, and it was told why.
func TestCodexFullLengthWait(t *testing.T) {
	c := NewCodexEnv(t, "codexer")
	c.Model.Push(
		func(*ModelRequest) Turn {
			return Turn{Tool: codexTool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 60}}
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
	t.Logf("a 60 s wait under codex: result after %v: %.200s", took, tr.Text)
	if tr.IsError {
		t.Errorf("the wait failed at the client: %s", tr.Text)
	}
	var p Page
	if err := tr.JSON(&p); err != nil || len(p.Records) != 0 {
		t.Errorf("the wait's result = %q, want an empty page", tr.Text)
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
