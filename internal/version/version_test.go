package version_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/internal/version"
)

// The plugin manifest says the version the binaries say.
func TestVersion_PluginManifest(t *testing.T) {
	var plugin struct {
		Version string `json:"version"`
	}
	raw, err := os.ReadFile("../../.claude-plugin/plugin.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &plugin))
	require.Equal(t, version.Version, plugin.Version, ".claude-plugin/plugin.json")

	// The marketplace need not carry a version; where it does, it is this one.
	raw, err = os.ReadFile("../../.claude-plugin/marketplace.json")
	require.NoError(t, err)
	var market struct {
		Version  string `json:"version"`
		Metadata struct {
			Version string `json:"version"`
		} `json:"metadata"`
		Plugins []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(raw, &market))
	for _, v := range []string{market.Version, market.Metadata.Version} {
		if v != "" {
			require.Equal(t, version.Version, v, ".claude-plugin/marketplace.json")
		}
	}
	for _, p := range market.Plugins {
		if p.Version != "" {
			require.Equal(t, version.Version, p.Version, ".claude-plugin/marketplace.json, plugin %s", p.Name)
		}
	}
}

func TestVersion_Form(t *testing.T) {
	require.Regexp(t, `^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`, version.Version, "a semantic version without a leading v")
}

// One value set at link time reaches every binary and the MCP server info.
// Only a real go build with -ldflags shows it: this is the suite's one such
// build, made through testbin so that a run where nothing changed reuses
// it (its key holds the flags and every source).
func TestVersion_EveryBinarySaysIt(t *testing.T) {
	testbin.SkipShort(t)
	const want = "9.8.7-linktest"
	built, err := testbin.Make(testbin.Options{
		Packages: testbin.Commands,
		LDFlags:  "-X github.com/tractat-us/bee/internal/version.Version=" + want,
	})
	require.NoError(t, err)
	dir := built.Dir

	for _, name := range []string{"bee", "bee-mcp", "bee-hook"} {
		// bee-mcp says it on stderr: its stdout is the protocol.
		out, err := exec.Command(filepath.Join(dir, name), "--version").CombinedOutput()
		require.NoError(t, err, "%s --version: %s", name, out)
		require.Equal(t, name+" "+want+"\n", string(out))
	}

	// The bridge's MCP server info.
	cmd := exec.Command(filepath.Join(dir, "bee-mcp"), "--source", "none", "--agent", "versiontest", "--run-dir", filepath.Join(t.TempDir(), "run"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// stdin stays open until the answer is read: a client that has gone
	// (stdin closed) is owed no answer.
	_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	require.NoError(t, err)
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "no answer to initialize")
	var resp struct {
		Result struct {
			ServerInfo struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"serverInfo"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &resp), "%s", sc.Bytes())
	require.Equal(t, "bee", resp.Result.ServerInfo.Name)
	require.Equal(t, want, resp.Result.ServerInfo.Version)
	require.NoError(t, stdin.Close())
	for sc.Scan() {
	}
	require.NoError(t, cmd.Wait(), "bee-mcp ends cleanly once stdin closes")
}
