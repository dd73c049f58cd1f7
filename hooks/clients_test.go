package hooks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		"/home/you/go/bin/bee-mcp": `"/home/you/go/bin/bee-mcp"`,
		`/opt/my "bee"/bee-mcp`:    `"/opt/my \"bee\"/bee-mcp"`,
		`C:\bee`:                   `"C:\\bee"`,
		"a\nb\x7f":                 `"a\u000ab\u007f"`,
		"café":                     `"café"`,
	} {
		require.Equal(t, want, tomlString(in), in)
	}
}

func TestCodexConfig(t *testing.T) {
	cfg := CodexConfig(`/opt/my "bee"/bee-mcp`)
	require.Contains(t, cfg, "\n[mcp_servers.bee]\ncommand = \"/opt/my \\\"bee\\\"/bee-mcp\"\n")
	require.Contains(t, cfg, "\ndefault_tools_approval_mode = \"approve\"\n")
	for _, line := range strings.Split(strings.TrimSpace(cfg), "\n") {
		require.True(t, line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") || strings.Contains(line, " = "), "not a TOML line: %q", line)
	}
}

func TestGeminiConfig(t *testing.T) {
	var cfg struct {
		MCPServers map[string]struct {
			Command string `json:"command"`
			Trust   bool   `json:"trust"`
		} `json:"mcpServers"`
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Name, Type, Command string
			} `json:"hooks"`
		} `json:"hooks"`
	}
	dec := json.NewDecoder(strings.NewReader(GeminiConfig("/opt/bee/bee-mcp", "'/opt/my bee/bee-hook'")))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&cfg))
	require.Equal(t, "/opt/bee/bee-mcp", cfg.MCPServers["bee"].Command)
	require.True(t, cfg.MCPServers["bee"].Trust)
	require.Len(t, cfg.Hooks, 1)
	require.Len(t, cfg.Hooks["SessionStart"], 1)
	ss := cfg.Hooks["SessionStart"][0]
	require.Equal(t, "clear", ss.Matcher)
	require.Len(t, ss.Hooks, 1)
	require.Equal(t, "command", ss.Hooks[0].Type)
	require.Equal(t, "bee-clear", ss.Hooks[0].Name)
	require.Equal(t, "'/opt/my bee/bee-hook'", ss.Hooks[0].Command)
}
