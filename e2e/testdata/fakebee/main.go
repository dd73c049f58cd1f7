// Command fakebee is a throwaway stand-in for bee-mcp, used only to develop
// the e2e harness before the real bridge existed: it serves bee_whoami and a
// bee_wait_action that just waits (and logs a cancel) over stdio.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type whoami struct {
	Identity  string `json:"identity"`
	ClaudePid int    `json:"claudePid"`
	SessionID string `json:"sessionId"`
	Pid       int    `json:"pid"`
}

type waitIn struct {
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

type waitOut struct {
	Records []any  `json:"records"`
	Cursor  string `json:"cursor"`
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s := mcp.NewServer(&mcp.Implementation{Name: "fakebee"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "bee_whoami", Description: "who am I"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{Identity: "agent:fake#00000000", ClaudePid: os.Getppid(), SessionID: os.Getenv("CLAUDE_CODE_SESSION_ID"), Pid: os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "bee_wait_action", Description: "wait for an action"},
		func(ctx context.Context, req *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, waitOut, error) {
			d := time.Duration(in.TimeoutSeconds) * time.Second
			if d == 0 {
				d = 45 * time.Second
			}
			log.Info("wait started", "timeout", d)
			select {
			case <-ctx.Done():
				log.Info("wait cancelled", "err", ctx.Err())
			case <-time.After(d):
				log.Info("wait timed out")
			}
			return nil, waitOut{Records: []any{}}, nil
		})
	log.Info("fakebee serving", "pid", os.Getpid(), "ppid", os.Getppid())
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Info("fakebee done", "err", err)
	}
}
