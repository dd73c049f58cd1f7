package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handshakeGrace is how long the session setup waits for the client to
// list the tools before it opens the board anyway.
const handshakeGrace = 250 * time.Millisecond

// A handshake tells the session setup when the client has finished its
// handshake, so that opening the board (SQLite's schema, the member's
// join: most of a start's CPU) does not compete with the handshake for
// the machine while Claude Code waits for the tools list, as it does for
// every MCP server of a session at once. The setup begins once the
// client has listed the tools or called one (that call waits for the
// session in any case), or handshakeGrace after the bridge started,
// whichever comes first: a client that never lists the tools gets its
// board a moment later, never not at all. The run file and the control
// channel do not wait: a hook may look for them from the session's start.
type handshake struct {
	done chan struct{}
	once sync.Once
}

func newHandshake() *handshake { return &handshake{done: make(chan struct{})} }

// end says the handshake is over. It may be called more than once.
func (h *handshake) end() { h.once.Do(func() { close(h.done) }) }

// wait returns once the handshake is over, grace has passed, or ctx has
// ended.
func (h *handshake) wait(ctx context.Context, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// middleware ends the handshake when the client calls a tool (before the
// call, which waits for the session) or has listed the tools (once the
// list is made; it is written as the setup begins).
func (h *handshake) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch req.(type) {
		case *mcp.CallToolRequest:
			h.end()
		case *mcp.ListToolsRequest:
			defer h.end()
		}
		return next(ctx, method, req)
	}
}
