package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
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
	//lint:ignore SA1019 the SDK's default capability, which the handshake keeps
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

// TestServedTools_CallAsTheSDKWould: a tool call served by servedTools
// reaches the client as the SDK's own registry would send it (resultType,
// empty content, structured content and all).
func TestServedTools_CallAsTheSDKWould(t *testing.T) {
	handler := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Name == "bare" {
			return &mcp.CallToolResult{}, nil // no content: sent as []
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"n":1}`}},
			StructuredContent: map[string]any{"n": 1},
			IsError:           true,
		}, nil
	}
	tools := []*mcp.Tool{
		{Name: "bare", InputSchema: &jsonschema.Schema{Type: "object"}},
		{Name: "full", InputSchema: &jsonschema.Schema{Type: "object"}},
	}
	sdk := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "0"}, nil)
	served := servedTools{list: tools, handlers: map[string]mcp.ToolHandler{}}
	for _, tool := range tools {
		sdk.AddTool(tool, handler)
		served.handlers[tool.Name] = handler
	}
	ours := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "0"}, &mcp.ServerOptions{Capabilities: servedCapabilities()})
	ours.AddReceivingMiddleware(served.middleware)

	callJSON := func(srv *mcp.Server, name string) string {
		t.Helper()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(t.Context(), st, nil)
		require.NoError(t, err)
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(t.Context(), ct, nil)
		require.NoError(t, err)
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name})
		require.NoError(t, err)
		raw, err := json.Marshal(res)
		require.NoError(t, err)
		return string(raw)
	}
	for _, name := range []string{"bare", "full"} {
		want := callJSON(sdk, name)
		require.Contains(t, want, `"resultType":"complete"`, "the SDK marks results for this client")
		require.JSONEq(t, want, callJSON(ours, name), name)
	}
}

// TestServedTools_MarkCompleteCopiesEveryField: markComplete copies every
// exported field of CallToolResult; a field the SDK adds fails here until
// markComplete copies it too.
func TestServedTools_MarkCompleteCopiesEveryField(t *testing.T) {
	var fields []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[mcp.CallToolResult]()) {
		if f.IsExported() && len(f.Index) == 1 {
			fields = append(fields, f.Name)
		}
	}
	require.ElementsMatch(t, []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}, fields,
		"CallToolResult's fields changed: copy the new ones in markComplete")

	res := &mcp.CallToolResult{
		Meta:              mcp.Meta{"k": "v"},
		Content:           []mcp.Content{&mcp.TextContent{Text: "t"}},
		StructuredContent: map[string]any{"n": 1},
		IsError:           true,
		RequestState:      "s",
	}
	got, err := json.Marshal(markComplete(res))
	require.NoError(t, err)
	want, err := json.Marshal(res)
	require.NoError(t, err)
	var g, w map[string]any
	require.NoError(t, json.Unmarshal(got, &g))
	require.NoError(t, json.Unmarshal(want, &w))
	require.Equal(t, "complete", g["resultType"])
	delete(g, "resultType")
	require.Equal(t, w, g)
}
