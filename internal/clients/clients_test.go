package clients

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/ancestry"
)

func TestFromImplementation(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		kind          ancestry.Client
		cap           time.Duration
		wakes         bool
		str           string
	}{
		// The names measured in each client's handshake.
		{name: "claude-code", version: "2.1.328", kind: ancestry.Claude, wakes: true, str: "Claude Code 2.1.328"},
		{name: "codex-mcp-client", version: "0.171.0", kind: ancestry.Codex, cap: CodexWaitCap, str: "Codex CLI 0.171.0"},
		{name: "gemini-cli-mcp-client", version: "0.61.0", kind: ancestry.Gemini, str: "Gemini CLI 0.61.0"},
		// Names like them.
		{name: "Codex", kind: ancestry.Codex, cap: CodexWaitCap, str: "Codex CLI"},
		{name: "gemini-cli", version: "1", kind: ancestry.Gemini, str: "Gemini CLI 1"},
		// Others are served as Claude Code was before.
		{name: "test", version: "0", wakes: true, str: "test 0"},
		{name: "", wakes: true, str: ""},
		{name: "gemini", version: "9", wakes: true, str: "gemini 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := FromImplementation(tc.name, tc.version)
			require.Equal(t, tc.kind, c.Kind)
			require.Equal(t, tc.cap, c.WaitCap)
			require.Equal(t, tc.wakes, c.Wakes)
			require.Equal(t, tc.str, c.String())
		})
	}
}

func TestClient_Cap(t *testing.T) {
	codex := FromImplementation("codex-mcp-client", "0.171.0")
	require.Equal(t, 45*time.Second, codex.Cap(45*time.Second))
	require.Equal(t, CodexWaitCap, codex.Cap(CodexWaitCap))
	require.Equal(t, CodexWaitCap, codex.Cap(60*time.Second))
	require.Less(t, codex.Cap(time.Hour), codex.ToolTimeout, "a wait never outlives the client's tool timeout")
	require.Less(t, codex.Cap(time.Hour), 60*time.Second, "nor the 60 s of earlier Codex releases")
	gemini := FromImplementation("gemini-cli-mcp-client", "0.61.0")
	require.Equal(t, 60*time.Second, gemini.Cap(60*time.Second))
	require.Less(t, 60*time.Second, gemini.ToolTimeout)
}

// The middleware tells each connection about its own client and never
// changes the server's tools: a second client of the same server sees no
// note of the first.
func TestMiddleware(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "s"}, &mcp.ServerOptions{Instructions: "Base."})
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "w", Description: "Wait.", InputSchema: schema}, noop)
	srv.AddTool(&mcp.Tool{Name: "a", Description: "Await.", InputSchema: schema}, noop)
	srv.AddTool(&mcp.Tool{Name: "p", Description: "Post.", InputSchema: schema}, noop)
	srv.AddTool(&mcp.Tool{Name: "other", Description: "Other.", InputSchema: schema}, noop)
	srv.AddReceivingMiddleware(Middleware(Tools{Wait: "w", Await: "a", Post: "p"}))

	list := func(name string) (string, map[string]string) {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(t.Context(), st, nil)
		require.NoError(t, err)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(t.Context(), ct, nil)
		require.NoError(t, err)
		defer func() {
			cs.Close()
			ss.Wait()
		}()
		res, err := cs.ListTools(t.Context(), nil)
		require.NoError(t, err)
		descs := map[string]string{}
		for _, tool := range res.Tools {
			descs[tool.Name] = tool.Description
		}
		return cs.InitializeResult().Instructions, descs
	}
	for range 2 {
		instr, descs := list("codex-mcp-client")
		codex := FromImplementation("codex-mcp-client", "1")
		require.Equal(t, codex.Instructions("Base."), instr)
		require.Equal(t, "Wait. "+codex.WaitNote(), descs["w"])
		require.Equal(t, "Await. "+codex.AwaitNote(), descs["a"])
		require.Equal(t, "Post. "+codex.PostNote(), descs["p"])
		require.Equal(t, "Other.", descs["other"])

		instr, descs = list("claude-code")
		require.True(t, strings.HasPrefix(instr, "Base.\n"))
		require.NotContains(t, instr, "Codex")
		require.NotContains(t, descs["w"], "Codex")
		require.Equal(t, 1, strings.Count(descs["w"], "Wait."))
	}
}
