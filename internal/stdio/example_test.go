package stdio_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/internal/stdio"
)

// Serving an MCP server on stdin/stdout, logging to stderr, and undoing what
// a withheld response carried.
func ExampleTransport() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	server := mcp.NewServer(&mcp.Implementation{Name: "bee", Version: "dev"}, nil)
	t := &stdio.Transport{
		In:     os.Stdin,
		Out:    os.Stdout,
		Logger: logger,
		OnDropped: func(id jsonrpc.ID, result json.RawMessage) {
			logger.Info("cancelled call's result not delivered", "id", id.Raw())
		},
	}
	session, err := server.Connect(ctx, t, nil)
	if err != nil {
		logger.Error("connect", "error", err)
		return
	}
	_ = session.Wait()
}
