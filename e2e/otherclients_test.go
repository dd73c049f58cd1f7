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

// StartTmuxPlain is StartTmuxNamed for a CLI that takes no --debug-file.
func (e *Env) StartTmuxPlain(exe string, args ...string) *Tmux {
	e.t.Helper()
	x := &Tmux{e: e, sock: filepath.Join(e.Root, "tmux.sock")}
	quoted := []string{"exec", shq(exe)}
	for _, a := range args {
		quoted = append(quoted, shq(a))
	}
	out, err := x.tmux("new-session", "-d", "-s", "bee", "-x", "200", "-y", "50", "-c", e.Project,
		strings.Join(quoted, " "), ";", "set-option", "-t", "bee", "remain-on-exit", "on")
	if err != nil {
		e.t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("---- tmux pane ----\n%s", x.Capture())
		}
		_, _ = x.tmux("kill-server")
	})
	pid, err := x.paneValue("#{pane_pid}")
	if err != nil {
		e.t.Fatalf("tmux pane pid: %v", err)
	}
	x.Pid, _ = strconv.Atoi(pid)
	return x
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

// children lists the live children of pid.
func children(pid int) []int {
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
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
