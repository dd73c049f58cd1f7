package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/hooks"
)

// --print-config --client codex|gemini prints that client's block, naming
// this binary and the bee-mcp beside it (when there is none, bare bee-mcp,
// said on stderr).
func TestRun_PrintConfigClients(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	beside := filepath.Join(filepath.Dir(exe), "bee-mcp")
	bridge := "bee-mcp"
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
		bridge = beside
	}
	for _, tc := range []struct {
		client, want string
	}{
		{"claude", hooks.ConfigFor(shellQuote(exe))},
		{"codex", hooks.CodexConfig(bridge)},
		{"gemini", hooks.GeminiConfig(bridge, shellQuote(exe))},
	} {
		t.Run(tc.client, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, run(t.Context(), []string{"--print-config", "--client", tc.client}, failReader{t}, &stdout, &stderr))
			require.Equal(t, tc.want, stdout.String())
			if bridge == "bee-mcp" && tc.client != "claude" {
				require.Contains(t, stderr.String(), "no bee-mcp next to")
			}
		})
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"--print-config", "--client", "cursor"}, failReader{t}, &stdout, &stderr))
	require.Empty(t, stdout.String())
	require.Contains(t, stderr.String(), `--client must be claude, codex or gemini, not "cursor"`)
}

func TestBridgeBeside(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "bee-hook")
	var stderr bytes.Buffer
	require.Equal(t, "bee-mcp", bridgeBeside(exe, &stderr))
	require.Contains(t, stderr.String(), "no bee-mcp next to "+exe)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bee-mcp"), nil, 0o755))
	stderr.Reset()
	require.Equal(t, filepath.Join(dir, "bee-mcp"), bridgeBeside(exe, &stderr))
	require.Empty(t, stderr.String())
}
