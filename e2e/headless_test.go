//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	toolWhoami  = "mcp__bee__bee_whoami"
	toolWait    = "mcp__bee__bee_wait_action"
	toolFinish  = "mcp__bee__bee_finish_action"
	toolPost    = "mcp__bee__bee_post_action"
	toolRelease = "mcp__bee__bee_release_action"
)

// Scenario a: headless `claude -p`, bee registered with `claude mcp add`
// and allowed with --allowedTools mcp__bee. The model checks in, waits; a
// person posts an action with the bee CLI while it waits; the action reaches
// the model as the tool result; the model finishes it; the board shows it
// done; the bridge leaves nothing behind.
func TestHeadlessWaitClaimFinish(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()

	const title, body = "e2e: headless action", "please finish me"
	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		Call(toolWait, map[string]any{"timeoutSeconds": 30}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var p Page
			if !parseResult(t, "bee_wait_action", tr, &p) || len(p.Records) != 1 {
				t.Errorf("bee_wait_action returned %q, want exactly one record", tr.Text)
				return Turn{Text: "no action came"}
			}
			return Turn{Tool: toolFinish, Input: map[string]any{"id": p.Records[0].IDValue(), "result": "finished by the e2e model"}}
		},
		Say("all done"),
	)
	run := e.StartHeadless(claudeBin, "Check in with bee, wait for the next action and finish it.", "--allowedTools", "mcp__bee")
	pid := run.Cmd.Process.Pid

	whoReq := e.MustToolCall(toolWhoami, 1, 60*time.Second)
	who := e.WhoamiOf(whoReq)
	t.Logf("bee_whoami: %+v (claude pid %d)", who, pid)
	if who.ClaudePid == nil || *who.ClaudePid != pid {
		t.Errorf("bee_whoami claudePid = %v, want the claude process %d", ptrStr(who.ClaudePid), pid)
	}
	if who.Agent != "e2e" {
		t.Errorf("bee_whoami agent = %q, want e2e (BEE_AGENT)", who.Agent)
	}
	if agents := e.Bee("agents"); !regexp.MustCompile(regexp.QuoteMeta(who.Identity) + `\s+Claude Code\s`).MatchString(agents) {
		t.Errorf("bee agents does not name %s's client Claude Code:\n%s", who.Identity, agents)
	}
	if who.SessionID != whoReq.SessionID {
		t.Errorf("bee_whoami sessionId = %q, want the CLI's session %q", who.SessionID, whoReq.SessionID)
	}
	if who.Source != "" && who.Source != "board" {
		t.Errorf("bee_whoami source = %q, want board", who.Source)
	}
	if _, err := os.Stat(filepath.Join(e.RunDir, strconv.Itoa(pid)+".json")); err != nil {
		t.Errorf("run file for claude pid %d: %v", pid, err)
	}

	waitReq := e.MustToolCall(toolWait, 1, 30*time.Second)
	time.Sleep(1500 * time.Millisecond) // the call reaches the bridge and waits
	if _, _, done := e.API.WaitResultFor(0, waitReq.ToolUseID); done {
		t.Fatalf("bee_wait_action returned before anything was posted")
	}
	posted := e.Post(title, body)
	postedAt := time.Now()
	t.Logf("posted %s while the model waited", posted.IDString())

	resReq, tr := e.ToolResult(waitReq, 30*time.Second)
	t.Logf("post -> tool result at the API: %v", resReq.At.Sub(postedAt))
	var page Page
	if parseResult(t, "bee_wait_action", tr, &page) {
		if len(page.Records) != 1 {
			t.Fatalf("bee_wait_action: %d records, want 1: %s", len(page.Records), tr.Text)
		}
		got := page.Records[0]
		if got.IDString() != posted.IDString() || got.Title != title || got.Body != body {
			t.Errorf("bee_wait_action record = %+v, want the posted %s %q/%q", got, posted.IDString(), title, body)
		}
		if got.State != "claimed" || got.Holder != who.Identity {
			t.Errorf("bee_wait_action record state=%q holder=%q, want claimed by %s", got.State, got.Holder, who.Identity)
		}
	}

	finReq := e.MustToolCall(toolFinish, 1, 30*time.Second)
	if _, tr := e.ToolResult(finReq, 30*time.Second); tr.IsError {
		t.Errorf("bee_finish_action: tool error %s", tr.Text)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	if out := run.Stdout.String(); !strings.Contains(out, "all done") {
		t.Errorf("claude -p printed %q, want the model's last words", out)
	}

	rec := e.Show(posted.IDString())
	t.Logf("bee show %s: state=%s holder=%s result=%q", rec.IDString(), rec.State, rec.Holder, rec.Result)
	if rec.State != "done" {
		t.Errorf("bee show %s: state %q, want done", posted.IDString(), rec.State)
	}
	if rec.Result != "" && rec.Result != "finished by the e2e model" {
		t.Errorf("bee show %s: result %q", posted.IDString(), rec.Result)
	}
	expectCleanEnd(t, e)
}

// Scenario d: the npm package's native binary run directly (its comm is
// claude.exe), bee from an --mcp-config file. The bridge still finds its
// Claude process: claudePid is that process and its run file appears.
func TestNativeBinaryClaudeExe(t *testing.T) {
	if filepath.Base(claudeExe) != "claude.exe" {
		t.Fatalf("the CLI's native binary is %s, not claude.exe: cannot test the claude.exe ancestor", claudeExe)
	}
	e := NewEnv(t)
	cfg := filepath.Join(e.Root, "mcp.json")
	writeJSON(t, cfg, map[string]any{"mcpServers": map[string]any{
		"bee": map[string]any{"command": filepath.Join(e.WrapDir, "bee-mcp"), "args": []string{}},
	}})

	var claudePid atomic.Int64
	type seen struct {
		comm        string
		runFile     string
		runFileMode os.FileMode
		err         error
	}
	seenCh := make(chan seen, 1)
	e.API.Push(
		Call(toolWhoami, map[string]any{}),
		func(r *APIRequest) Turn {
			// While claude is alive: what is its comm, and is the run file there?
			pid := int(claudePid.Load())
			s := seen{comm: procComm(pid)}
			path := filepath.Join(e.RunDir, strconv.Itoa(pid)+".json")
			if fi, err := os.Stat(path); err != nil {
				s.err = err
			} else {
				s.runFileMode = fi.Mode().Perm()
				s.runFile = readFile(path)
			}
			seenCh <- s
			return Turn{Text: "checked in"}
		},
	)
	run := e.StartHeadless(claudeExe, "Who are you on the bee board?",
		"--mcp-config", cfg, "--strict-mcp-config", "--allowedTools", "mcp__bee")
	pid := run.Cmd.Process.Pid
	claudePid.Store(int64(pid))

	who := e.WhoamiOf(e.MustToolCall(toolWhoami, 1, 60*time.Second))
	t.Logf("bee_whoami: %+v (claude.exe pid %d)", who, pid)
	if who.ClaudePid == nil || *who.ClaudePid != pid {
		t.Errorf("bee_whoami claudePid = %v, want the claude.exe process %d", ptrStr(who.ClaudePid), pid)
	}
	var s seen
	select {
	case s = <-seenCh:
	case <-time.After(30 * time.Second):
		t.Fatal("the model's second turn never came")
	}
	if s.comm != "claude.exe" {
		t.Errorf("the claude process's comm is %q, want claude.exe (the point of this test)", s.comm)
	}
	if s.err != nil {
		t.Errorf("run file for claude pid %d while it ran: %v", pid, s.err)
	} else {
		var rf struct {
			Port  int    `json:"port"`
			Token string `json:"token"`
			Pid   int    `json:"pid"`
		}
		if err := json.Unmarshal([]byte(s.runFile), &rf); err != nil {
			t.Errorf("run file is not JSON: %v", err)
		}
		t.Logf("run file %d.json: mode %v, port %d, bridge pid %d", pid, s.runFileMode, rf.Port, rf.Pid)
		if s.runFileMode != 0o600 {
			t.Errorf("run file mode %v, want 0600", s.runFileMode)
		}
		if rf.Port <= 0 || rf.Token == "" || rf.Pid <= 0 {
			t.Errorf("run file %+v lacks port, token or pid", rf)
		}
		if who.Pid != 0 && rf.Pid != who.Pid {
			t.Errorf("run file names bridge pid %d, bee_whoami says %d", rf.Pid, who.Pid)
		}
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude.exe -p: %v", err)
	}
	expectCleanEnd(t, e)
}

// expectCleanEnd checks what a bridge must leave after its claude ended: no
// run file, no live bee-mcp, nothing claimed on the board.
func expectCleanEnd(t *testing.T, e *Env) {
	t.Helper()
	if !eventually(5*time.Second, func() bool { return len(e.RunFiles()) == 0 }) {
		t.Errorf("run files left in BEE_RUN_DIR after claude ended: %v", e.RunFiles())
	}
	if !eventually(5*time.Second, func() bool { return len(e.beeMCPPids()) == 0 }) {
		t.Errorf("bee-mcp processes left after claude ended: %v", e.beeMCPPids())
	}
	for _, r := range e.List() {
		if r.State == "claimed" {
			t.Errorf("action %s still %s by %q after claude ended", r.IDString(), r.State, r.Holder)
		}
	}
	if agents := e.Agents(); len(agents) != 0 {
		t.Errorf("bee agents after claude ended: %+v, want none", agents)
	}
	expectHealthyMCP(t, e)
}

// expectHealthyMCP reads claude's own debug log: the connection to the
// bridge must never have dropped, and no progress notification may have
// come for a call that was already answered.
func expectHealthyMCP(t *testing.T, e *Env) {
	t.Helper()
	for _, line := range e.DebugLines("connection dropped", "unknown token", "unknown progress") {
		t.Errorf("claude's debug log: %s", line)
	}
	var end []string
	for _, line := range e.DebugLines(`MCP server "bee"`, `MCP server "plugin:bee:bee"`) {
		if containsAll(strings.ToLower(line), "sigint") || strings.Contains(line, "exited") || strings.Contains(line, "closed") || strings.Contains(line, "[ERROR]") {
			end = append(end, line)
		}
	}
	t.Logf("claude's view of the bridge's end:\n%s", strings.Join(end, "\n"))
}

// Bounded wait through the real client: a wait longer than the 10 s
// progress interval with nothing posted returns empty at its bound, the
// progress notifications upset nothing, and the next call works.
func TestHeadlessWaitTimesOut(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	e.API.Push(
		Call(toolWait, map[string]any{"timeoutSeconds": 12}),
		Call(toolWhoami, map[string]any{}),
		Say("timed-out-ok"),
	)
	run := e.StartHeadless(claudeBin, "Wait a little for a bee action.", "--allowedTools", "mcp__bee")
	waitReq := e.MustToolCall(toolWait, 1, 60*time.Second)
	resReq, tr := e.ToolResult(waitReq, 40*time.Second)
	took := resReq.At.Sub(waitReq.Answered)
	t.Logf("bee_wait_action(timeoutSeconds: 12) with nothing posted: %s after %v", tr.Text, took)
	var page Page
	if parseResult(t, "bee_wait_action", tr, &page) && len(page.Records) != 0 {
		t.Errorf("bee_wait_action returned records with nothing posted: %s", tr.Text)
	}
	if len(page.Cursor) == 0 || string(page.Cursor) == "null" {
		t.Logf("note: the timed-out wait returned no cursor: %s", tr.Text)
	}
	if took < 11*time.Second || took > 15*time.Second {
		t.Errorf("the 12 s wait took %v", took)
	}
	e.WhoamiOf(e.MustToolCall(toolWhoami, 1, 30*time.Second))
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	if !strings.Contains(run.Stdout.String(), "timed-out-ok") {
		t.Errorf("claude -p printed %q", run.Stdout.String())
	}
	expectCleanEnd(t, e)
}

func ptrStr(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// The other board tools through the real client: the model posts an action
// for another agent (people see it with bee), then claims the action a
// person posted and releases it: it is open again for someone else.
func TestHeadlessPostAndRelease(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	pre := e.Post("e2e: to be released", "claim me, then let go")
	e.API.Push(
		Call(toolPost, map[string]any{"to": "reviewer", "title": "e2e: for the reviewer", "body": "posted by the model"}),
		Call(toolWait, map[string]any{"timeoutSeconds": 10}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var p Page
			if !parseResult(t, "bee_wait_action", tr, &p) || len(p.Records) != 1 {
				t.Errorf("bee_wait_action returned %q, want the posted action", tr.Text)
				return Turn{Text: "nothing to release"}
			}
			return Turn{Tool: toolRelease, Input: map[string]any{"id": p.Records[0].IDValue()}}
		},
		Call(toolRelease, map[string]any{"id": pre.IDValue()}), // not held any more: a tool error
		Say("released"),
	)
	run := e.StartHeadless(claudeBin, "Post for the reviewer, then take and release an action.", "--allowedTools", "mcp__bee")
	if err := run.Wait(t, 90*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}

	postReq := e.MustToolCall(toolPost, 1, time.Second)
	_, tr := e.ToolResult(postReq, time.Second)
	if tr.IsError {
		t.Errorf("bee_post_action: tool error %s", tr.Text)
	}
	mine, ok := e.FindByTitle("e2e: for the reviewer")
	if !ok {
		t.Fatalf("the model's post is not on the board")
	}
	t.Logf("model's post: %s to=%q from=%q state=%s", mine.IDString(), mine.To, mine.From, mine.State)
	if mine.To != "reviewer" || mine.State != "open" || !identityRE.MatchString(mine.From) {
		t.Errorf("the model's post is %+v, want open, to reviewer, from the bridge's identity", mine)
	}
	if rec := e.Show(pre.IDString()); rec.State != "open" || rec.Holder != "" {
		t.Errorf("after bee_release_action %s is %s held by %q, want open", pre.IDString(), rec.State, rec.Holder)
	}
	_, tr = e.ToolResult(e.MustToolCall(toolRelease, 2, time.Second), time.Second)
	t.Logf("releasing an action not held: is_error=%v %q", tr.IsError, tr.Text)
	if !tr.IsError || !strings.Contains(tr.Text, pre.IDString()) {
		t.Errorf("releasing an action this identity does not hold: want a tool error naming %s, got is_error=%v %q", pre.IDString(), tr.IsError, tr.Text)
	}
	expectCleanEnd(t, e)
}
