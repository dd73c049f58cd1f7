package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// waited runs h.wait with grace in a goroutine and returns a channel
// closed when it returns.
func waited(ctx context.Context, h *handshake, grace time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.wait(ctx, grace)
	}()
	return done
}

func requireEnds(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testtime.Bound(2 * time.Second)):
		t.Fatalf("wait did not return %s", what)
	}
}

func requireWaits(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("wait returned %s", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestHandshake_Middleware: the setup waits through initialize and the
// like, and begins once the client has listed the tools or calls one.
func TestHandshake_Middleware(t *testing.T) {
	t.Parallel()
	next := func(context.Context, string, mcp.Request) (mcp.Result, error) { return nil, nil }
	for _, c := range []struct {
		name string
		req  mcp.Request
	}{
		{"tools/list", &mcp.ListToolsRequest{}},
		{"tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "bee_whoami"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHandshake()
			done := waited(t.Context(), h, time.Hour)
			_, err := h.middleware(next)(t.Context(), "initialize", &mcp.InitializeRequest{})
			require.NoError(t, err)
			requireWaits(t, done, "after initialize")
			_, err = h.middleware(next)(t.Context(), c.name, c.req)
			require.NoError(t, err)
			requireEnds(t, done, "after "+c.name)
			_, err = h.middleware(next)(t.Context(), c.name, c.req) // and again: no panic
			require.NoError(t, err)
		})
	}
}

// TestHandshake_GraceAndContext: a client that never lists the tools gets
// its setup after the grace, and an ending bridge's setup waits no longer.
func TestHandshake_GraceAndContext(t *testing.T) {
	t.Parallel()
	requireEnds(t, waited(t.Context(), newHandshake(), 10*time.Millisecond), "after its grace")

	ctx, cancel := context.WithCancel(t.Context())
	done := waited(ctx, newHandshake(), time.Hour)
	requireWaits(t, done, "before its context ended")
	cancel()
	requireEnds(t, done, "when its context ended")
}
