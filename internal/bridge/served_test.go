package bridge

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestServedTools_AsTheSDKWould: the bridge serves its tools without the
// SDK's registry, and a client sees what the registry would have given:
// the tools capability (listChanged), every tool by name in order with the
// schemas of schemas.json, and an unknown tool's call refused as a
// protocol error that names it.
func TestServedTools_AsTheSDKWould(t *testing.T) {
	_, cs := connect(t, nil, nil, nil)
	caps := cs.InitializeResult().Capabilities
	require.NotNil(t, caps.Tools)
	require.True(t, caps.Tools.ListChanged)
	require.NotNil(t, caps.Logging)

	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	served, err := servedSchemas()
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		s, ok := served[tool.Name]
		require.True(t, ok, tool.Name)
		for _, c := range []struct {
			got  any
			want schemaJSON
		}{{tool.InputSchema, s.Input}, {tool.OutputSchema, s.Output}} {
			got, err := json.Marshal(c.got)
			require.NoError(t, err)
			require.JSONEq(t, string(c.want), string(got), tool.Name)
		}
	}
	require.Len(t, names, len(toolTable()))
	require.True(t, slices.IsSorted(names), "tools by name: %v", names)

	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bee_no_such_tool"})
	var rpcErr *jsonrpc.Error
	require.True(t, errors.As(err, &rpcErr), "want a protocol error, got %v", err)
	require.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
	require.Contains(t, rpcErr.Message, "bee_no_such_tool")
}
