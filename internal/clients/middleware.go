package clients

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools names the bridge's tools whose descriptions depend on the client.
type Tools struct {
	Wait, Await, Post string
}

// Middleware returns receiving middleware for the bridge's MCP server that
// tells each connection's model what waiting means under its client: it
// appends Instructions to the handshake's instructions (initialize, and
// server/discover for MCP 2026-07-28), and WaitNote, AwaitNote and
// PostNote to the descriptions of the tools t names in tools/list. It
// never changes the server's own tools: a listed tool is copied before its
// description is.
func Middleware(t Tools) mcp.Middleware {
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
				for i, tool := range r.Tools {
					var note string
					switch tool.Name {
					case t.Wait:
						note = c.WaitNote()
					case t.Await:
						note = c.AwaitNote()
					case t.Post:
						note = c.PostNote()
					default:
						continue
					}
					cp := *tool
					cp.Description = strings.TrimRight(tool.Description, " ") + " " + note
					r.Tools[i] = &cp
				}
			}
			return res, nil
		}
	}
}
