package bridge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// A wait in flight when the bridge shuts down (a /mcp reconnect) is told
// that a new bridge takes over and to call again, not only that this one
// is going: "shutting down" alone reads as final.
func TestWait_ShutdownSaysANewBridgeTakesOver(t *testing.T) {
	waiting := make(chan struct{}, 1)
	src := &actionstest.Source{NextFunc: func(ctx context.Context, _ identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
		waiting <- struct{}{}
		<-ctx.Done()
		return actions.Page{}, ctx.Err()
	}}
	s, cs := connect(t, src, nil, nil)
	got := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolWait, Arguments: map[string]any{"timeoutSeconds": 30}})
		if err != nil {
			got <- "call failed: " + err.Error()
			return
		}
		var g Guidance
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &g)
		got <- g.Error + "\n" + g.Next
	}()
	select {
	case <-waiting:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the wait never reached the source")
	}
	require.NoError(t, s.Depart(t.Context()))
	var msg string
	select {
	case msg = <-got:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the wait did not end when the bridge departed")
	}
	require.Contains(t, msg, "shutting down")
	require.Contains(t, msg, "new bridge")
	require.Contains(t, msg, "call "+ToolWait+" again")

	res := call(t, cs, ToolPost, map[string]any{"title": "t", "body": "b"})
	require.Contains(t, said(t, res), "new bridge")
	require.Contains(t, said(t, res), "call "+ToolPost+" again")
}
