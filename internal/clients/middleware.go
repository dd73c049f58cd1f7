package clients

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Middleware returns receiving middleware for the bridge's MCP server that
// tells each connection's model what waiting means under its client: it
// appends Instructions to the handshake's instructions (initialize, and
// server/discover for MCP 2026-07-28), and WaitNote and AwaitNote to the
// descriptions of the tools named waitTool and awaitTool in tools/list.
// It never changes the server's own tools: a listed tool is copied before
// its description is.
func Middleware(waitTool, awaitTool string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil || res == nil {
				return res, err
			}
			c := FromRequest(req)
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Instructions = c.Instructions(r.Instructions)
			case *mcp.DiscoverResult:
				r.Instructions = c.Instructions(r.Instructions)
			case *mcp.ListToolsResult:
				for i, t := range r.Tools {
					var note string
					switch t.Name {
					case waitTool:
						note = c.WaitNote()
					case awaitTool:
						note = c.AwaitNote()
					default:
						continue
					}
					cp := *t
					cp.Description = strings.TrimRight(t.Description, " ") + " " + note
					r.Tools[i] = &cp
				}
			}
			return res, nil
		}
	}
}
