//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testAPIKey is any key; the CLI remembers the last 20 characters as
// approved in .claude.json so it never asks.
const testAPIKey = "sk-ant-api03-bee-e2e-0123456789abcdefghijklmnop"

// Env is one test's isolated world: its own HOME, CLAUDE_CONFIG_DIR, board,
// run dir, project folder and fake API. Nothing leaks between tests.
type Env struct {
	t testing.TB

	Root      string // t.TempDir()
	Home      string
	ConfigDir string // CLAUDE_CONFIG_DIR
	Project   string // claude's cwd
	RunDir    string // BEE_RUN_DIR
	Board     string // BEE_BOARD
	WrapDir   string // bee-mcp / bee-hook wrappers that keep their stderr; first on PATH
	BridgeLog string // stderr of every bee-mcp this test started
	HookLog   string // stderr of every bee-hook this test ran
	DebugLog  string // claude's own debug log (--debug-file)
	API       *FakeAPI
	Vars      []string // the full environment for claude and bee

	mu    sync.Mutex
	dumps []func() string // extra failure output
	runs  []*Run
}

// NewEnv builds the isolated world and registers failure output and cleanup.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	root := t.TempDir()
	if keepTemp() {
		r, err := os.MkdirTemp("", "bee-e2e-"+t.Name()+"-")
		if err != nil {
			t.Fatal(err)
		}
		root = r
		t.Logf("keeping %s", root)
	}
	e := &Env{
		t:         t,
		Root:      root,
		Home:      filepath.Join(root, "home"),
		ConfigDir: filepath.Join(root, "claude-config"),
		Project:   filepath.Join(root, "project"),
		RunDir:    filepath.Join(root, "run"),
		Board:     filepath.Join(root, "board", "board.db"),
		WrapDir:   filepath.Join(root, "wrap"),
		BridgeLog: filepath.Join(root, "bee-mcp.stderr.log"),
		HookLog:   filepath.Join(root, "bee-hook.stderr.log"),
		DebugLog:  filepath.Join(root, "claude-debug.log"),
	}
	for _, d := range []string{e.Home, e.ConfigDir, e.Project, filepath.Dir(e.Board), e.WrapDir} {
		must(t, os.MkdirAll(d, 0o755))
	}
	// The bridge creates BEE_RUN_DIR itself (0700); do not pre-create it.

	// Onboarding, theme, API key approval and folder trust, so the
	// interactive CLI starts straight at its prompt.
	keyTail := testAPIKey[len(testAPIKey)-20:]
	state := map[string]any{
		"hasCompletedOnboarding": true,
		"theme":                  "dark",
		"customApiKeyResponses":  map[string]any{"approved": []string{keyTail}, "rejected": []string{}},
		"projects": map[string]any{
			e.Project: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true},
		},
	}
	writeJSON(t, filepath.Join(e.ConfigDir, ".claude.json"), state)
	writeJSON(t, filepath.Join(e.Home, ".claude.json"), state)

	// Wrappers that exec the real binaries (same pid, so the process tree is
	// unchanged) with stderr appended to a log the test can read.
	writeExec(t, filepath.Join(e.WrapDir, "bee-mcp"),
		fmt.Sprintf("#!/bin/sh\nexec %s \"$@\" 2>>%s\n", shq(filepath.Join(binDir, "bee-mcp")), shq(e.BridgeLog)))
	writeExec(t, filepath.Join(e.WrapDir, "bee-hook"),
		fmt.Sprintf("#!/bin/sh\nexec %s \"$@\" 2>>%s\n", shq(filepath.Join(binDir, "bee-hook")), shq(e.HookLog)))

	e.API = NewFakeAPI(t)
	e.Vars = append(cleanEnviron(),
		"HOME="+e.Home,
		"CLAUDE_CONFIG_DIR="+e.ConfigDir,
		"PATH="+e.WrapDir+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ANTHROPIC_BASE_URL="+e.API.URL,
		"ANTHROPIC_API_KEY="+testAPIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"BEE_BOARD="+e.Board,
		"BEE_RUN_DIR="+e.RunDir,
		"BEE_AGENT=e2e",
		"BEE_LOG_LEVEL=debug",
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
	)

	t.Cleanup(func() {
		e.mu.Lock()
		runs := e.runs
		e.mu.Unlock()
		for _, r := range runs {
			// A run still going (the test failed): end it as a user would
			// (Ctrl-C), then for sure.
			if !r.Ended() {
				_ = r.Cmd.Process.Signal(syscall.SIGINT)
				if !eventually(3*time.Second, r.Ended) {
					_ = r.Cmd.Process.Kill()
					<-r.done
				}
			}
		}
		if t.Failed() {
			e.dumpAll()
		}
		// Any bridge of ours still alive is a leak: say so, then end it (by pid).
		eventually(5*time.Second, func() bool { return len(e.beeMCPPids()) == 0 })
		for _, pid := range e.beeMCPPids() {
			t.Errorf("a bee-mcp process (pid %d) outlived its test; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return e
}

// OnlyInGoBin takes bee's commands off PATH (it becomes
// /usr/local/bin:/usr/bin:/bin, without go either) and puts them in
// ~/go/bin, where the plugin's launchers look last: bee-mcp through the
// wrapper that keeps its log; bee-hook through its wrapper when
// keepHookLog (the guard decides on stdout), or as built (a waiter's wake
// text is its stderr, which must reach Claude Code).
func (e *Env) OnlyInGoBin(keepHookLog bool) {
	e.t.Helper()
	gobin := filepath.Join(e.Home, "go", "bin")
	must(e.t, os.MkdirAll(gobin, 0o755))
	must(e.t, os.Symlink(filepath.Join(e.WrapDir, "bee-mcp"), filepath.Join(gobin, "bee-mcp")))
	hook := filepath.Join(binDir, "bee-hook")
	if keepHookLog {
		hook = filepath.Join(e.WrapDir, "bee-hook")
	}
	must(e.t, os.Symlink(hook, filepath.Join(gobin, "bee-hook")))
	var vars []string
	for _, kv := range e.Vars {
		if !strings.HasPrefix(kv, "PATH=") {
			vars = append(vars, kv)
		}
	}
	e.Vars = append(vars, "PATH=/usr/local/bin:/usr/bin:/bin")
}

// OnFailure adds output to print when the test fails.
func (e *Env) OnFailure(f func() string) {
	e.mu.Lock()
	e.dumps = append(e.dumps, f)
	e.mu.Unlock()
}

func (e *Env) dumpAll() {
	t := e.t
	t.Logf("---- fake API requests ----\n%s", e.API.Dump())
	t.Logf("---- bee-mcp stderr (%s) ----\n%s", e.BridgeLog, readFile(e.BridgeLog))
	t.Logf("---- bee-hook stderr (%s) ----\n%s", e.HookLog, readFile(e.HookLog))
	t.Logf("---- claude debug log, MCP and hook lines (%s) ----\n%s", e.DebugLog, strings.Join(e.DebugLines("mcp", "hook", "bee"), "\n"))
	if ents, err := os.ReadDir(e.RunDir); err == nil {
		var names []string
		for _, en := range ents {
			names = append(names, en.Name())
		}
		t.Logf("---- run dir %s: %v", e.RunDir, names)
	}
	if out, err := e.BeeRun("list", "--all", "--json"); err == nil {
		t.Logf("---- bee list --all --json ----\n%s", out)
	}
	if out, err := e.BeeRun("agents", "--json"); err == nil {
		t.Logf("---- bee agents --json ----\n%s", out)
	}
	e.mu.Lock()
	dumps := append([]func() string(nil), e.dumps...)
	e.mu.Unlock()
	for _, d := range dumps {
		t.Log(d())
	}
}

// cleanEnviron is the test process's environment without anything that
// could point claude or bee elsewhere (the suite may itself run inside
// Claude Code).
func cleanEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "CLAUDE"), strings.HasPrefix(k, "BEE_"),
			strings.HasPrefix(k, "MCP_"), strings.HasPrefix(k, "TMUX"), strings.HasPrefix(k, "OTEL_"),
			k == "HOME", k == "PATH", k == "TERM", k == "DISABLE_AUTOUPDATER", k == "IS_SANDBOX":
			continue
		case k == "CI", k == "CONTINUOUS_INTEGRATION", strings.HasPrefix(k, "CI_"):
			// CI=true (as CI runs this suite) turns Gemini CLI's TUI into
			// its non-interactive mode ("No input provided via stdin"),
			// through the is-in-ci check of its terminal UI library.
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Command prepares a command in the test's world (cwd: the project folder).
func (e *Env) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = e.Vars
	cmd.Dir = e.Project
	return cmd
}

// Claude runs the CLI to completion (for `claude mcp add`, `claude plugin
// ...`) and fails the test if it does not succeed.
func (e *Env) Claude(args ...string) string {
	e.t.Helper()
	cmd := e.Command(claudeBin, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env, cmd.Dir = e.Vars, e.Project
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// AddBeeWithCLI registers the bridge the way the README tells users to:
// `claude mcp add --scope user bee -- <absolute path to bee-mcp>` (here the
// wrapper that keeps its stderr).
func (e *Env) AddBeeWithCLI() {
	e.t.Helper()
	out := e.Claude("mcp", "add", "--scope", "user", "bee", "--", filepath.Join(e.WrapDir, "bee-mcp"))
	e.t.Logf("claude mcp add: %s", strings.TrimSpace(out))
}

// Run is a background process (a headless `claude -p`).
type Run struct {
	Cmd    *exec.Cmd
	Stdout bytes.Buffer
	Stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// Start starts a command in the background with its output captured.
func (e *Env) Start(cmd *exec.Cmd) *Run {
	e.t.Helper()
	r := &Run{Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.Stdout, &r.Stderr
	must(e.t, cmd.Start())
	e.mu.Lock()
	e.runs = append(e.runs, r)
	e.mu.Unlock()
	go func() { r.err = cmd.Wait(); close(r.done) }()
	e.OnFailure(func() string {
		return fmt.Sprintf("---- %s: stdout ----\n%s\n---- stderr ----\n%s", strings.Join(cmd.Args, " "), r.Stdout.String(), r.Stderr.String())
	})
	return r
}

// StartHeadless starts `claude -p PROMPT args...` in the background, with
// its debug log in DebugLog.
func (e *Env) StartHeadless(exe, prompt string, args ...string) *Run {
	e.t.Helper()
	return e.Start(e.Command(exe, append([]string{"-p", prompt, "--debug-file", e.DebugLog}, args...)...))
}

// DebugLines returns the lines of claude's debug log that mention any of
// the substrings (ignoring case).
func (e *Env) DebugLines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(readFile(e.DebugLog), "\n") {
		l := strings.ToLower(line)
		for _, s := range subs {
			if strings.Contains(l, strings.ToLower(s)) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// Ended reports whether the process has ended.
func (r *Run) Ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to end; it fails the test after timeout.
func (r *Run) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		_ = r.Cmd.Process.Kill()
		<-r.done
		t.Fatalf("%s did not end within %v", filepath.Base(r.Cmd.Path), timeout)
		return nil
	}
}

// BeeRun runs the bee CLI against the test's board.
func (e *Env) BeeRun(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bee"), args...)
	cmd.Env, cmd.Dir = e.Vars, e.Project
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("bee %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// Bee runs the bee CLI and fails the test on error.
func (e *Env) Bee(args ...string) string {
	e.t.Helper()
	out, err := e.BeeRun(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Record is an action as the bee CLI and the bridge's tools show it.
type Record struct {
	ID     json.RawMessage `json:"id"`
	Seq    json.RawMessage `json:"seq"`
	To     string          `json:"to"`
	From   string          `json:"from"`
	Title  string          `json:"title"`
	Body   string          `json:"body"`
	State  string          `json:"state"`
	Holder string          `json:"holder"`
	Result any             `json:"result"`
	Reason string          `json:"reason"`
}

// IDString is the id as text (a JSON string unquoted, a number as is).
func (r Record) IDString() string {
	var s string
	if json.Unmarshal(r.ID, &s) == nil {
		return s
	}
	return string(r.ID)
}

// IDValue is the id as it was given, for passing back to a tool.
func (r Record) IDValue() any {
	var v any
	_ = json.Unmarshal(r.ID, &v)
	return v
}

// decodeRecords accepts a list of records or an object holding one under
// "records" (or "actions").
func decodeRecords(data []byte) ([]Record, error) {
	var list []Record
	if err := json.Unmarshal(data, &list); err == nil {
		return list, nil
	}
	var page struct {
		Records []Record `json:"records"`
		Actions []Record `json:"actions"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, fmt.Errorf("not a list of records: %v: %.500s", err, data)
	}
	if page.Records != nil {
		return page.Records, nil
	}
	return page.Actions, nil
}

// List is `bee list --all --json`: every action, done ones included.
func (e *Env) List() []Record {
	e.t.Helper()
	recs, err := decodeRecords([]byte(e.Bee("list", "--all", "--json")))
	if err != nil {
		e.t.Fatalf("bee list --all --json: %v", err)
	}
	return recs
}

// Agent is one live identity as `bee agents --json` shows it.
type Agent struct {
	Identity  string   `json:"identity"`
	Agent     string   `json:"agent"`
	Pid       int      `json:"pid"`
	ClaudePid int      `json:"claudePid"`
	SessionID string   `json:"sessionId"`
	Holding   []string `json:"holding"`
	// WaiterSince is set while the session's wake-on-work waiter is armed.
	WaiterSince *time.Time `json:"waiterSince"`
}

// Agents is `bee agents --json`.
func (e *Env) Agents() []Agent {
	e.t.Helper()
	out := e.Bee("agents", "--json")
	var agents []Agent
	if err := json.Unmarshal([]byte(out), &agents); err != nil {
		e.t.Fatalf("bee agents --json: %v: %q", err, out)
	}
	return agents
}

// Show is `bee show --json ID` (bee's flags go before its arguments).
func (e *Env) Show(id string) Record {
	e.t.Helper()
	out := e.Bee("show", "--json", id)
	var rec Record
	if err := json.Unmarshal([]byte(out), &rec); err != nil || len(rec.ID) == 0 {
		var wrap struct {
			Record *Record `json:"record"`
			Action *Record `json:"action"`
		}
		if json.Unmarshal([]byte(out), &wrap) == nil && (wrap.Record != nil || wrap.Action != nil) {
			if wrap.Record != nil {
				return *wrap.Record
			}
			return *wrap.Action
		}
		e.t.Fatalf("bee show --json %s: cannot read %q: %v", id, out, err)
	}
	return rec
}

// Post is `bee post TITLE BODY`; it returns the posted record, found on the
// board by its (unique) title.
func (e *Env) Post(title, body string, extra ...string) Record {
	e.t.Helper()
	out := e.Bee(append(append([]string{"post"}, extra...), title, body)...)
	for _, r := range e.List() {
		if r.Title == title {
			return r
		}
	}
	e.t.Fatalf("bee post %q printed %q, but bee list does not show it", title, out)
	return Record{}
}

// FindByTitle looks a record up on the board.
func (e *Env) FindByTitle(title string) (Record, bool) {
	for _, r := range e.List() {
		if r.Title == title {
			return r, true
		}
	}
	return Record{}, false
}

// Whoami is bee_whoami's structured result.
type Whoami struct {
	Identity  string `json:"identity"`
	Agent     string `json:"agent"`
	ClaudePid *int   `json:"claudePid"`
	SessionID string `json:"sessionId"`
	Source    string `json:"source"`
	Pid       int    `json:"pid"` // the bridge's own pid
}

// Page is bee_wait_action's and bee_list_actions's result.
type Page struct {
	Records []Record        `json:"records"`
	Cursor  json.RawMessage `json:"cursor"`
}

// BridgeLogText is everything bee-mcp wrote to stderr so far.
func (e *Env) BridgeLogText() string { return readFile(e.BridgeLog) }

// WaitBridgeLog waits for a line of the bridge's stderr, past byte offset
// from, that contains every one of the substrings (ignoring case); it
// returns the line and when it was seen.
func (e *Env) WaitBridgeLog(from int, timeout time.Duration, subs ...string) (string, time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		text := e.BridgeLogText()
		if from < len(text) {
			for _, line := range strings.Split(text[from:], "\n") {
				if containsAll(strings.ToLower(line), lower(subs)...) {
					return line, time.Now(), true
				}
			}
		}
		if time.Now().After(deadline) {
			return "", time.Time{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RunFiles lists the names in BEE_RUN_DIR.
func (e *Env) RunFiles() []string {
	ents, err := os.ReadDir(e.RunDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	return names
}

// beeMCPPids lists the live bee-mcp processes of this test's world.
func (e *Env) beeMCPPids() []int { return e.procs("bee-mcp", filepath.Join(binDir, "bee-mcp")) }

// procs lists the live processes named comm whose command line matches
// pattern (as pgrep -f takes it) and that were started in this test's
// world: their environment holds its BEE_RUN_DIR. Tests may run in
// parallel, so a process of another test's is never counted, or killed;
// and the shell that runs a hook command is not the hook.
func (e *Env) procs(comm, pattern string) []int {
	out, _ := exec.Command("pgrep", "-f", pattern).Output()
	mark := []byte("BEE_RUN_DIR=" + e.RunDir + "\x00")
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if procComm(pid) != comm {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && (bytes.HasPrefix(env, mark) || bytes.Contains(env, append([]byte{0}, mark...))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// eventually polls cond until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	must(t, err)
	must(t, os.WriteFile(path, data, 0o600))
}

func writeExec(t testing.TB, path, content string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(content), 0o755))
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// shq quotes s for /bin/sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// procComm is /proc/PID/comm.
func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// parseResult decodes a tool result's JSON text, failing the test (from any
// goroutine) when it is an error or not JSON.
func parseResult(t testing.TB, what string, tr ToolResult, v any) bool {
	if tr.IsError {
		t.Errorf("%s: tool error: %s", what, tr.Text)
		return false
	}
	if err := tr.JSON(v); err != nil {
		t.Errorf("%s: result is not JSON: %v: %q", what, err, tr.Text)
		return false
	}
	return true
}

// WriteSettings writes a settings file for `claude --settings`: the bee
// tools allowed, and (withHook) the SessionStart/clear hook pointing at the
// built bee-hook, next to a recorder that appends each hook input to
// HookInputs.
func (e *Env) WriteSettings(withHook bool) string {
	e.t.Helper()
	s := map[string]any{"permissions": map[string]any{"allow": []string{"mcp__bee"}}}
	if withHook {
		s["hooks"] = map[string]any{"SessionStart": []any{map[string]any{
			"matcher": "clear",
			"hooks": []any{
				map[string]any{"type": "command", "command": shq(filepath.Join(e.WrapDir, "bee-hook"))},
				map[string]any{"type": "command", "command": "cat >> " + shq(e.HookInputs())},
			},
		}}}
	}
	path := filepath.Join(e.Root, "settings.json")
	writeJSON(e.t, path, s)
	return path
}

// HookInputs is where the recorder hook appends each SessionStart input.
func (e *Env) HookInputs() string { return filepath.Join(e.Root, "hook-inputs.jsonl") }

// HookInput is one recorded SessionStart input.
type HookInput struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Source         string `json:"source"`
}

// RecordedHookInputs reads the recorder's file.
func (e *Env) RecordedHookInputs() []HookInput {
	var out []HookInput
	dec := json.NewDecoder(strings.NewReader(readFile(e.HookInputs())))
	for {
		var in HookInput
		if dec.Decode(&in) != nil {
			return out
		}
		out = append(out, in)
	}
}

// ToolResult waits for the tool result of the call answered in req.
func (e *Env) ToolResult(req *APIRequest, timeout time.Duration) (*APIRequest, ToolResult) {
	e.t.Helper()
	if req == nil || req.ToolUseID == "" {
		e.t.Fatalf("no tool call to wait for")
	}
	next, tr, ok := e.API.WaitResultFor(timeout, req.ToolUseID)
	if !ok {
		e.t.Fatalf("no result for %s (%s) within %v", req.Answer.Tool, req.ToolUseID, timeout)
	}
	return next, tr
}

// MustToolCall waits for the n-th call of tool.
func (e *Env) MustToolCall(tool string, n int, timeout time.Duration) *APIRequest {
	e.t.Helper()
	req, ok := e.API.WaitToolCall(timeout, tool, n)
	if !ok {
		e.t.Fatalf("the model's call #%d of %s was not made within %v", n, tool, timeout)
	}
	return req
}

// WhoamiOf decodes bee_whoami's result for the call answered in req.
func (e *Env) WhoamiOf(req *APIRequest) Whoami {
	e.t.Helper()
	_, tr := e.ToolResult(req, 30*time.Second)
	var w Whoami
	if !parseResult(e.t, "bee_whoami", tr, &w) {
		e.t.FailNow()
	}
	if !identityRE.MatchString(w.Identity) {
		e.t.Errorf("bee_whoami identity %q is not agent:<name>#<8 hex>", w.Identity)
	}
	return w
}

var identityRE = regexp.MustCompile(`^agent:[^#]+#[0-9a-f]{8}$`)

func (w Whoami) String() string {
	return fmt.Sprintf("{identity:%s agent:%s claudePid:%s sessionId:%s source:%s pid:%d}", w.Identity, w.Agent, ptrStr(w.ClaudePid), w.SessionID, w.Source, w.Pid)
}
