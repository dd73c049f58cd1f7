package hooks

import (
	"fmt"
	"strings"
)

// CodexConfig returns the block of ~/.codex/config.toml that seats Codex CLI
// on the board: bee-mcp (bridge, its absolute path) as the MCP server
// "bee", with bee's tools approved, since Codex asks before every call of a
// tool that is not read-only and refuses it outright in `codex exec`.
//
// It has no hook: Codex CLI starts a new MCP server for each thread (a
// /clear or /new is a new thread, measured with 0.171.0), so the new
// thread has a new identity from its own bridge, and the old bridge
// departs when Codex unloads the old thread (thread_unload_delay_secs, 60 s
// by default).
func CodexConfig(bridge string) string {
	var b strings.Builder
	b.WriteString("# bee: a seat on the shared action board (bee-hook --print-config --client codex)\n")
	b.WriteString("[mcp_servers.bee]\n")
	fmt.Fprintf(&b, "command = %s\n", tomlString(bridge))
	b.WriteString("# bee's tools change the board; let Codex call them without asking each time.\n")
	b.WriteString("default_tools_approval_mode = \"approve\"\n")
	b.WriteString("# To name this agent (default: the project folder's name):\n")
	b.WriteString("# env = { BEE_AGENT = \"reviewer\" }\n")
	return b.String()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// GeminiConfig returns the settings.json blocks (~/.gemini/settings.json)
// that seat Gemini CLI on the board: bee-mcp (bridge, its absolute path) as
// the MCP server "bee", trusted so that its tools run without a
// confirmation each (Gemini CLI leaves untrusted MCP tools out of a
// headless `gemini -p` run), and bee-hook (command, shell words) as the
// SessionStart hook with matcher "clear", which retires the identity on
// /clear as under Claude Code: Gemini keeps the bridge across /clear and
// runs the hook with source "clear" (measured with 0.61.0).
func GeminiConfig(bridge, command string) string {
	type hook struct {
		Name    string `json:"name"`
		Type    string `json:"type"`
		Command string `json:"command"`
	}
	type matcher struct {
		Matcher string `json:"matcher"`
		Hooks   []hook `json:"hooks"`
	}
	type server struct {
		Command string `json:"command"`
		Trust   bool   `json:"trust"`
	}
	cfg := struct {
		MCPServers map[string]server `json:"mcpServers"`
		Hooks      struct {
			SessionStart []matcher `json:"SessionStart"`
		} `json:"hooks"`
	}{MCPServers: map[string]server{"bee": {Command: bridge, Trust: true}}}
	cfg.Hooks.SessionStart = []matcher{{Matcher: "clear", Hooks: []hook{{Name: "bee-clear", Type: "command", Command: command}}}}
	return indentedJSON(cfg)
}
