package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// servedTools serves the bridge's tools in place of the SDK's tool
// registry: tools/list answers them, with their schemas from schemas.json
// as they are, and tools/call runs their handlers as the SDK would
// (Server.callTool: the handler's result, its nil content sent as [], and
// marked complete for a client of MCP 2026-07-28 or later: see
// markComplete).
//
// The SDK's Server.AddTool checks each tool's schema for HTTP header
// annotations by marshalling it and decoding it again through a decoder
// with a 32 KiB buffer of its own: for the bridge's tools, 0.1-0.15 MiB of
// garbage and about 1.5 ms of CPU at every start, and a bridge starts
// without a garbage collection, so the garbage stays resident for as long
// as the session idles (BenchmarkExtraSessionPSS). Nothing else in the SDK
// reads a tool's schemas over stdio. A call of a tool the bridge does not
// serve, and a tools/list with a cursor (the one page has none), go on to
// the SDK, whose registry is empty: it answers them as it would, with an
// unknown tool error or its own page.
type servedTools struct {
	list     []*mcp.Tool                // by name, as tools/list gives them
	handlers map[string]mcp.ToolHandler // by tool name
}

// servedCapabilities is what the server announces: the SDK's default
// (logging) and the tools capability the SDK would announce for tools in
// its registry, so that the handshake is the same as with them there.
func servedCapabilities() *mcp.ServerCapabilities {
	//lint:ignore SA1019 the SDK's default capability (deprecated as of MCP 2026-07-28), kept so the handshake does not change
	return &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: true}}
}

// middleware is the receiving middleware that serves the tools.
func (st servedTools) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			if r.Params == nil {
				break
			}
			h, ok := st.handlers[r.Params.Name]
			if !ok {
				break
			}
			res, err := h(ctx, r)
			if err != nil || res == nil {
				return res, err
			}
			if res.Content == nil {
				cp := *res
				cp.Content = []mcp.Content{} // avoid "null", as the SDK does
				res = &cp
			}
			if marksComplete(r.Session) {
				res = markComplete(res)
			}
			return res, nil
		case *mcp.ListToolsRequest:
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			if err == nil && ok && (r.Params == nil || r.Params.Cursor == "") {
				// A copy: later middleware replaces the entries it changes.
				lr.Tools = append([]*mcp.Tool(nil), st.list...)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// protocolMarksComplete is the first MCP version whose tool results carry
// a resultType (multi-round-trip results, SEP-2322).
const protocolMarksComplete = "2026-07-28"

// marksComplete reports whether the SDK marks the tool results it sends
// ss complete (its clientSupportsMultiRoundTrip): the client negotiated
// protocolMarksComplete or later at initialize, or it never sent
// initialize (server/discover, as Claude Code 2.1.328 does), when the SDK
// takes its latest version.
func marksComplete(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p == nil || p.ProtocolVersion >= protocolMarksComplete
}

// completeTemplate is a CallToolResult whose (unexported) result type is
// "complete": the SDK sets it only through its own tool registry or by
// decoding.
var completeTemplate = sync.OnceValue(func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r); err != nil {
		panic(fmt.Sprintf("bridge: a complete tool result: %v", err)) // the SDK changed
	}
	return r
})

// markComplete returns a copy of res marked complete, as the SDK marks
// every tool result its registry returns to such a client. It copies
// every exported field of CallToolResult
// (TestServedTools_MarkCompleteCopiesEveryField holds it to that).
func markComplete(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := completeTemplate()
	out.Meta = res.Meta
	out.Content = res.Content
	out.StructuredContent = res.StructuredContent
	out.IsError = res.IsError
	out.InputRequests = res.InputRequests
	out.RequestState = res.RequestState
	return &out
}
