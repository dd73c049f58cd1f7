//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pluginFiles are the files that make the repository root a plugin and a
// marketplace.
var pluginFiles = []string{".claude-plugin/plugin.json", ".claude-plugin/marketplace.json", ".mcp.json", "hooks/hooks.json", "plugin/bee-hook", "plugin/bee-mcp"}

const (
	pluginPrefix = "mcp__plugin_bee_bee"
	pluginWhoami = pluginPrefix + "__bee_whoami"
	pluginWait   = pluginPrefix + "__bee_wait_action"
)

// The repository root is a Claude Code plugin: .claude-plugin/plugin.json,
// .mcp.json (bee-mcp from PATH) and hooks/hooks.json (bee-hook from PATH).
func TestPluginValidates(t *testing.T) {
	e := NewEnv(t)
	for _, f := range pluginFiles {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			t.Errorf("plugin file %s: %v", f, err)
		}
	}
	out := e.Claude("plugin", "validate", repoRoot)
	t.Logf("claude plugin validate: %s", lastLines(out, 3))
	if !strings.Contains(out, "Validation passed") {
		t.Errorf("claude plugin validate did not pass:\n%s", out)
	}
}

// Scenario e: `claude --plugin-dir <repo root>` (no --strict-mcp-config,
// which would drop the plugin's server): the plugin's bee-mcp, found on
// PATH, serves mcp__plugin_bee_bee__bee_whoami.
func TestPluginDirWhoami(t *testing.T) {
	e := NewEnv(t)
	pluginWhoamiRun(t, e, "--plugin-dir", repoRoot)
}

// Scenario e, marketplace path: `claude plugin marketplace add <dir>` and
// `claude plugin install bee@bee-local`, then a plain `claude -p`.
//
// The marketplace is a copy of the repository's plugin files only: install
// copies the whole marketplace folder (everything but .git, gitignored files
// included) into the plugin cache, and a checkout that ran e2e-setup holds
// the ~370 MB CLI under .e2e/.
func TestPluginMarketplaceInstall(t *testing.T) {
	e := NewEnv(t)
	market := filepath.Join(e.Root, "marketplace")
	for _, f := range pluginFiles {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		must(t, err)
		st, err := os.Stat(filepath.Join(repoRoot, f))
		must(t, err)
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(market, f)), 0o755))
		must(t, os.WriteFile(filepath.Join(market, f), data, st.Mode().Perm())) // the launchers stay executable
	}
	out := e.Claude("plugin", "marketplace", "add", market)
	t.Logf("claude plugin marketplace add: %s", lastLines(out, 2))
	out = e.Claude("plugin", "install", "bee@bee-local")
	t.Logf("claude plugin install: %s", lastLines(out, 2))
	pluginWhoamiRun(t, e)
}

func pluginWhoamiRun(t *testing.T, e *Env, extra ...string) {
	t.Helper()
	e.API.Push(Call(pluginWhoami, map[string]any{}), Say("plugin-ok"))
	args := append(extra, "--allowedTools", pluginPrefix)
	run := e.StartHeadless(claudeBin, "Who are you on the bee board?", args...)
	pid := run.Cmd.Process.Pid
	req := e.MustToolCall(pluginWhoami, 1, 60*time.Second)
	who := e.WhoamiOf(req)
	t.Logf("plugin bee_whoami: %+v (claude pid %d)", who, pid)
	if who.ClaudePid == nil || *who.ClaudePid != pid {
		t.Errorf("claudePid = %v, want %d", ptrStr(who.ClaudePid), pid)
	}
	if who.SessionID != req.SessionID {
		t.Errorf("sessionId = %q, want %q", who.SessionID, req.SessionID)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	if !strings.Contains(run.Stdout.String(), "plugin-ok") {
		t.Errorf("claude -p printed %q", run.Stdout.String())
	}
	expectCleanEnd(t, e)
}

// Scenario e, interactive: the plugin's own hooks/hooks.json (bee-hook from
// PATH) retires the plugin bridge's identity on /clear.
func TestPluginClearRetires(t *testing.T) {
	e := NewEnv(t)
	settings := filepath.Join(e.Root, "settings.json")
	writeJSON(t, settings, map[string]any{"permissions": map[string]any{"allow": []string{pluginPrefix}}})
	x := e.StartTmux(claudeBin, "--plugin-dir", repoRoot, "--settings", settings)
	if !x.WaitReady(45 * time.Second) {
		t.Fatal("the interactive CLI never showed its prompt")
	}
	e.API.Push(Call(pluginWhoami, map[string]any{}), Say("first-done"))
	x.Submit("Who am I?")
	who1 := e.WhoamiOf(e.MustToolCall(pluginWhoami, 1, 60*time.Second))
	if !x.WaitScreen(30*time.Second, "first-done") {
		t.Fatal("turn 1 did not finish on screen")
	}

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
		t.Fatalf("the plugin's hook did not make the bridge retire within 20 s of /clear")
	}
	t.Logf("/clear -> bridge log %q after %v", strings.TrimSpace(line), seenAt.Sub(clearAt))

	e.API.Push(Call(pluginWhoami, map[string]any{}), Say("second-done"))
	x.Submit("Who am I now?")
	req2 := e.MustToolCall(pluginWhoami, 2, 60*time.Second)
	who2 := e.WhoamiOf(req2)
	t.Logf("plugin identities: %s -> %s, session %s -> %s", who1.Identity, who2.Identity, who1.SessionID, who2.SessionID)
	if who2.Identity == who1.Identity {
		t.Errorf("the identity did not change across /clear")
	}
	if who2.SessionID != req2.SessionID {
		t.Errorf("after /clear sessionId = %q, want %q", who2.SessionID, req2.SessionID)
	}
	if !x.WaitScreen(30*time.Second, "second-done") {
		t.Fatal("turn 2 did not finish on screen")
	}
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectCleanEnd(t, e)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
