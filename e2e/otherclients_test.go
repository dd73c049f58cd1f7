//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Codex CLI and Gemini CLI releases the suite is pinned to; keep them
// in step with scripts/e2e-setup.
const (
	codexVersion  = "0.171.0"
	geminiVersion = "0.61.0"
)

var (
	codexBin  string // `codex` (npm's .bin link to the node launcher)
	geminiBin string // `gemini` (npm's .bin link to bundle/gemini.js)
)

// setupOtherClients finds the pinned Codex CLI and Gemini CLI
// (BEE_E2E_CODEX, BEE_E2E_GEMINI, else in the e2e cache) and checks their
// versions.
func setupOtherClients() error {
	cache := os.Getenv("BEE_E2E_CACHE")
	if cache == "" {
		cache = filepath.Join(repoRoot, ".e2e")
	}
	find := func(env, dir, bin, version string) (string, error) {
		p := os.Getenv(env)
		if p == "" {
			p = filepath.Join(cache, dir, "node_modules", ".bin", bin)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s not found at %s (run scripts/e2e-setup, or set %s): %v", bin, p, env, err)
		}
		out, err := exec.Command(p, "--version").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s --version: %v: %s", p, err, out)
		}
		if !strings.Contains(string(out), version) {
			return "", fmt.Errorf("%s --version says %q; the suite is pinned to %s (run scripts/e2e-setup)", p, strings.TrimSpace(string(out)), version)
		}
		return p, nil
	}
	var err error
	if codexBin, err = find("BEE_E2E_CODEX", "codex-"+codexVersion, "codex", codexVersion); err != nil {
		return err
	}
	geminiBin, err = find("BEE_E2E_GEMINI", "gemini-cli-"+geminiVersion, "gemini", geminiVersion)
	return err
}

// modelKey is the API key the other CLIs send the fake.
const modelKey = "bee-e2e-model-key"

// withoutClientVars drops what could point Codex or Gemini elsewhere.
func withoutClientVars(vars []string) []string {
	var out []string
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "CODEX_"), strings.HasPrefix(k, "GEMINI_"),
			strings.HasPrefix(k, "GOOGLE_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// printConfig is what the README tells a user to run: `bee-hook
// --print-config --client NAME`, with the built bee-hook.
func (e *Env) printConfig(client string) string {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "bee-hook"), "--print-config", "--client", client)
	cmd.Env = e.Vars
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		e.t.Fatalf("bee-hook --print-config --client %s: %v: %s", client, err, stderr.String())
	}
	return string(out)
}

// beeVars are the bee variables a client must hand its bridge: Codex CLI
// and Gemini CLI give an MCP server only some of their environment, so the
// test's board and run directory go in the server entry's env.
func (e *Env) beeVars(agent string) map[string]string {
	return map[string]string{"BEE_BOARD": e.Board, "BEE_RUN_DIR": e.RunDir, "BEE_AGENT": agent, "BEE_LOG_LEVEL": "debug"}
}

// CodexEnv is a test's world with Codex CLI seated on the board: its own
// CODEX_HOME whose config.toml points at a fake Responses API and holds
// what `bee-hook --print-config --client codex` prints.
type CodexEnv struct {
	*Env
	Model     *ModelAPI
	CodexHome string
}

// NewCodexEnv builds the world; agent is the bridge's BEE_AGENT, and
// extra goes into config.toml's top level (before any table).
func NewCodexEnv(t testing.TB, agent string, extra ...string) *CodexEnv {
	t.Helper()
	e := NewEnv(t)
	c := &CodexEnv{Env: e, Model: NewResponsesAPI(t), CodexHome: filepath.Join(e.Home, ".codex")}
	must(t, os.MkdirAll(c.CodexHome, 0o700))
	printed := e.printConfig("codex")
	// The bridge's stderr goes to the test's log through the wrapper, which
	// execs the printed bee-mcp.
	want := fmt.Sprintf("command = %q\n", filepath.Join(binDir, "bee-mcp"))
	if !strings.Contains(printed, want) {
		t.Fatalf("bee-hook --print-config --client codex does not name %s:\n%s", filepath.Join(binDir, "bee-mcp"), printed)
	}
	printed = strings.Replace(printed, want, fmt.Sprintf("command = %q\n", filepath.Join(e.WrapDir, "bee-mcp")), 1)
	var env []string
	for k, v := range e.beeVars(agent) {
		env = append(env, fmt.Sprintf("%s = %q", k, v))
	}
	cfg := strings.Join(append([]string{
		`model = "gpt-e2e"`,
		`model_provider = "e2e"`,
		`check_for_update_on_startup = false`,
	}, extra...), "\n") + "\n\n" +
		"[model_providers.e2e]\nname = \"bee e2e fake\"\n" +
		fmt.Sprintf("base_url = %q\n", c.Model.URL+"/v1") +
		"env_key = \"BEE_E2E_MODEL_KEY\"\nwire_api = \"responses\"\n\n" +
		fmt.Sprintf("[projects.%q]\ntrust_level = \"trusted\"\n\n", e.Project) +
		printed + "env = { " + strings.Join(env, ", ") + " }\n"
	must(t, os.WriteFile(filepath.Join(c.CodexHome, "config.toml"), []byte(cfg), 0o600))
	e.Vars = append(withoutClientVars(e.Vars), "CODEX_HOME="+c.CodexHome, "BEE_E2E_MODEL_KEY="+modelKey)
	e.OnFailure(func() string {
		return fmt.Sprintf("---- config.toml ----\n%s\n---- fake Responses API ----\n%s", cfg, c.Model.Dump())
	})
	// Codex's interactive TUI leaves an app-server daemon (and the bridges
	// of threads it has not unloaded yet) behind; end what this test
	// started, by pid.
	t.Cleanup(func() { killMatching(t, c.CodexHome) })
	return c
}

// Exec starts `codex exec PROMPT` in the background.
func (c *CodexEnv) Exec(prompt string) *Run {
	c.t.Helper()
	return c.Start(c.Command(codexBin, "exec", "--skip-git-repo-check", prompt))
}

// Tool names as the models of Codex CLI (namespace__tool) and Gemini CLI
// (mcp_<server>_<tool>) call bee's tools.
func codexTool(name string) string  { return "mcp__bee__" + name }
func geminiTool(name string) string { return "mcp_bee_" + name }

// GeminiEnv is a test's world with Gemini CLI seated on the board: its own
// HOME whose .gemini/settings.json points at a fake Gemini API and holds
// what `bee-hook --print-config --client gemini` prints.
type GeminiEnv struct {
	*Env
	Model *ModelAPI
}

// NewGeminiEnv builds the world; agent is the bridge's BEE_AGENT.
func NewGeminiEnv(t testing.TB, agent string) *GeminiEnv {
	t.Helper()
	e := NewEnv(t)
	g := &GeminiEnv{Env: e, Model: NewGeminiAPI(t)}
	dir := filepath.Join(e.Home, ".gemini")
	must(t, os.MkdirAll(dir, 0o700))
	var cfg map[string]any
	if err := json.Unmarshal([]byte(e.printConfig("gemini")), &cfg); err != nil {
		t.Fatalf("bee-hook --print-config --client gemini is not JSON: %v", err)
	}
	bee := cfg["mcpServers"].(map[string]any)["bee"].(map[string]any)
	if bee["command"] != filepath.Join(binDir, "bee-mcp") {
		t.Fatalf("bee-hook --print-config --client gemini names %v, want %s", bee["command"], filepath.Join(binDir, "bee-mcp"))
	}
	bee["command"] = filepath.Join(e.WrapDir, "bee-mcp") // keeps its stderr
	bee["env"] = e.beeVars(agent)
	ss := cfg["hooks"].(map[string]any)["SessionStart"].([]any)[0].(map[string]any)
	hook := ss["hooks"].([]any)[0].(map[string]any)
	if hook["command"] != filepath.Join(binDir, "bee-hook") {
		t.Fatalf("bee-hook --print-config --client gemini runs %v, want %s", hook["command"], filepath.Join(binDir, "bee-hook"))
	}
	hook["command"] = shq(filepath.Join(e.WrapDir, "bee-hook"))
	// A recorder next to it, as for Claude Code.
	ss["hooks"] = append(ss["hooks"].([]any), map[string]any{"name": "recorder", "type": "command", "command": "cat >> " + shq(e.HookInputs())})
	cfg["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
	cfg["general"] = map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true}
	writeJSON(t, filepath.Join(dir, "settings.json"), cfg)
	writeJSON(t, filepath.Join(dir, "trustedFolders.json"), map[string]string{e.Project: "TRUST_FOLDER"})
	e.Vars = append(withoutClientVars(e.Vars), "GEMINI_API_KEY="+modelKey, "GOOGLE_GEMINI_BASE_URL="+g.Model.URL)
	e.OnFailure(func() string {
		b, _ := json.MarshalIndent(cfg, "", "  ")
		return fmt.Sprintf("---- settings.json ----\n%s\n---- fake Gemini API ----\n%s", b, g.Model.Dump())
	})
	return g
}

// Prompt starts `gemini -p PROMPT` in the background.
func (g *GeminiEnv) Prompt(prompt string) *Run {
	g.t.Helper()
	return g.Start(g.Command(geminiBin, "-p", prompt))
}

// StartTmuxPlain is StartTmux for a CLI that takes no --debug-file.
func (e *Env) StartTmuxPlain(exe string, args ...string) *Tmux {
	e.t.Helper()
	return e.startTmux("tmux.sock", exe, args...)
}

// killMatching SIGKILLs the processes whose command line contains s (a
// path under the test's own temporary directory, so never another test's).
func killMatching(t testing.TB, s string) {
	out, _ := exec.Command("pgrep", "-f", s).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// WhoamiIn decodes bee_whoami's result from what the model read: JSON
// (Codex CLI) or the text line (Gemini CLI: "You are agent:x#... (agent x)
// on the board source. Agent process: N. Session: S. Client: C.").
func WhoamiIn(t testing.TB, tr ToolResult) (w Whoami, client string) {
	t.Helper()
	if tr.IsError {
		t.Fatalf("bee_whoami: tool error: %s", tr.Text)
	}
	var full struct {
		Whoami
		Client string `json:"client"`
	}
	if json.Unmarshal([]byte(tr.Text), &full) == nil {
		return full.Whoami, full.Client
	}
	var pid int
	var id, agent, session string
	text := tr.Text
	if i := strings.Index(text, "You are "); i >= 0 {
		fmt.Sscanf(text[i:], "You are %s (agent %s", &id, &agent)
	}
	agent = strings.TrimSuffix(agent, ")")
	if i := strings.Index(text, "Agent process: "); i >= 0 {
		fmt.Sscanf(text[i:], "Agent process: %d.", &pid)
	}
	if i := strings.Index(text, "Session: "); i >= 0 {
		session = strings.TrimSuffix(strings.Fields(text[i+len("Session: "):])[0], ".")
	}
	if i := strings.Index(text, "Client: "); i >= 0 {
		client = strings.TrimSuffix(strings.TrimSpace(text[i+len("Client: "):]), ".")
	}
	w = Whoami{Identity: id, Agent: agent, SessionID: session}
	if pid != 0 {
		w.ClaudePid = &pid
	}
	if !identityRE.MatchString(w.Identity) {
		t.Fatalf("bee_whoami: cannot read an identity from %q", tr.Text)
	}
	return w, client
}

// expectNoBridge fails the test unless no bee-mcp of this test's world is
// left within timeout.
func expectNoBridge(t *testing.T, e *Env, timeout time.Duration) {
	t.Helper()
	if !eventually(timeout, func() bool { return len(e.beeMCPPids()) == 0 }) {
		t.Errorf("bee-mcp processes still running %v after the session ended: %v", timeout, e.beeMCPPids())
	}
}

// A seat is a Codex CLI or Gemini CLI session under test: its fake model,
// how its model names bee's tools, and how to start a headless run.
type seat struct {
	name  string // the client's name, for messages
	model *ModelAPI
	tool  func(string) string
	start func(prompt string) *Run
}

func (c *CodexEnv) seat() seat {
	return seat{name: "codex exec", model: c.Model, tool: codexTool, start: c.Exec}
}

func (g *GeminiEnv) seat() seat {
	return seat{name: "gemini -p", model: g.Model, tool: geminiTool, start: g.Prompt}
}

// waitClaimFinish is the seat scenario: the headless session's model
// checks in (bee_whoami, given to checkWho with the run), waits; a person
// posts for agent; the wait returns it, the model finishes it; the run ends
// and leaves no bee process.
func waitClaimFinish(t *testing.T, e *Env, s seat, agent string, checkWho func(who Whoami, client string, run *Run)) {
	t.Helper()
	title, body := "e2e: for "+agent, "please finish me, "+agent
	result := "finished by " + agent
	s.model.Push(
		func(*ModelRequest) Turn { return Turn{Tool: s.tool("bee_whoami")} },
		func(*ModelRequest) Turn {
			return Turn{Tool: s.tool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 40}}
		},
		func(r *ModelRequest) Turn {
			tr, _ := r.LastResult()
			id, ok := claimedID(tr)
			if !ok {
				t.Errorf("bee_wait_action returned %q, want one record", tr.Text)
				return Turn{Text: "no action came"}
			}
			return Turn{Tool: s.tool("bee_finish_action"), Input: map[string]any{"id": id, "result": result}}
		},
		func(*ModelRequest) Turn { return Turn{Text: agent + " is done"} },
	)
	run := s.start("Check in with bee, wait for the next action and finish it.")
	_, tr := s.model.MustResult(s.model.MustToolCall(s.tool("bee_whoami"), 1, 90*time.Second), 30*time.Second)
	who, client := WhoamiIn(t, tr)
	t.Logf("bee_whoami under %s: %+v client %q", s.name, who, client)
	if who.Agent != agent {
		t.Errorf("bee_whoami agent = %q, want %s (BEE_AGENT from the config's env)", who.Agent, agent)
	}
	checkWho(who, client, run)

	waitReq := s.model.MustToolCall(s.tool("bee_wait_action"), 1, 30*time.Second)
	time.Sleep(1500 * time.Millisecond) // the call reaches the bridge and waits
	if _, _, done := s.model.WaitResultFor(0, waitReq.CallID); done {
		t.Fatal("bee_wait_action returned before anything was posted")
	}
	postedAt := time.Now()
	posted := e.Post(title, body, "--to", agent)
	resReq, tr := s.model.MustResult(waitReq, 30*time.Second)
	t.Logf("post -> tool result at the fake API: %v", resReq.At.Sub(postedAt))
	if id, ok := claimedID(tr); !ok || id != posted.IDString() || !strings.Contains(tr.Text, body) {
		t.Errorf("bee_wait_action gave %q, want %s with its body", tr.Text, posted.IDString())
	}
	if _, tr := s.model.MustResult(s.model.MustToolCall(s.tool("bee_finish_action"), 1, 30*time.Second), 30*time.Second); tr.IsError {
		t.Errorf("bee_finish_action: %s", tr.Text)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("%s: %v", s.name, err)
	}
	if out := run.Stdout.String(); !strings.Contains(out, agent+" is done") {
		t.Errorf("%s printed %q, want the model's last words", s.name, out)
	}
	if rec := e.Show(posted.IDString()); rec.State != "done" || rec.Result != result {
		t.Errorf("bee show %s: %s %v, want done with %q", posted.IDString(), rec.State, rec.Result, result)
	}
	expectNoBridge(t, e, 10*time.Second)
}

// claudeAwaitsSeat is the outcome scenario: a Claude Code session (claude
// -p) posts an action for agent and awaits it; the seat's headless session
// takes it and finishes it; the Claude session's await returns it done
// with the seat's result.
func claudeAwaitsSeat(t *testing.T, e *Env, s seat, agent string) {
	t.Helper()
	e.AddBeeWithCLI()
	result := agent + " built it"
	e.API.Push(
		Call(toolPost, map[string]any{"to": agent, "title": "e2e: build it, " + agent, "body": "make"}),
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
	s.model.Push(
		func(*ModelRequest) Turn {
			return Turn{Tool: s.tool("bee_wait_action"), Input: map[string]any{"timeoutSeconds": 30}}
		},
		func(r *ModelRequest) Turn {
			tr, _ := r.LastResult()
			id, ok := claimedID(tr)
			if !ok {
				t.Errorf("%s's bee_wait_action returned %q, want the lead's action", s.name, tr.Text)
				return Turn{Text: "nothing came"}
			}
			return Turn{Tool: s.tool("bee_finish_action"), Input: map[string]any{"id": id, "result": result}}
		},
		func(*ModelRequest) Turn { return Turn{Text: "finished"} },
	)
	lead := e.StartHeadless(claudeBin, "Hand the build to "+agent+" and wait for it.", "--allowedTools", "mcp__bee")
	awaitReq := e.MustToolCall(toolAwait, 1, 60*time.Second)
	worker := s.start("Take the next action.")

	finReq := s.model.MustToolCall(s.tool("bee_finish_action"), 1, 90*time.Second)
	finishedAt := time.Now()
	if _, tr := s.model.MustResult(finReq, 30*time.Second); tr.IsError {
		t.Errorf("bee_finish_action under %s: %s", s.name, tr.Text)
	}
	resReq, tr := e.ToolResult(awaitReq, 30*time.Second)
	t.Logf("%s's finish -> the lead's await result at the API: %v", s.name, resReq.At.Sub(finishedAt))
	var got struct {
		Records []Record `json:"records"`
	}
	if parseResult(t, "bee_await_action", tr, &got) {
		if len(got.Records) != 1 || got.Records[0].State != "done" || got.Records[0].Result != result {
			t.Errorf("bee_await_action returned %+v, want the action done with %q", got.Records, result)
		}
	}
	for name, r := range map[string]*Run{"lead (claude -p)": lead, "worker (" + s.name + ")": worker} {
		if err := r.Wait(t, 60*time.Second); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	expectNoBridge(t, e, 10*time.Second)
}
