// Command baresdk is the yardstick for bee-mcp's benchmarks: a bare go-sdk
// stdio server with three trivial tools and nothing else.
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type in struct {
	N int `json:"n,omitempty"`
}

type out struct {
	N int `json:"n"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "0"}, nil)
	for _, name := range []string{"one", "two", "three"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "returns its input"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
			return nil, out(a), nil
		})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
