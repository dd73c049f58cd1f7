package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// clientFixture is every line Claude Code 2.1.328 wrote to a go-sdk server's
// stdin while the user pressed Esc during a tool call: server/discover
// (probe), subscriptions/listen, server/discover, tools/list, tools/call,
// notifications/cancelled.
const clientFixture = "testdata/claude-code-2.1.328-client-lines.jsonl"

// fixtureLines returns the fixture's lines with the recorded tool `hold`
// replaced by the test server's `block`.
func fixtureLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(clientFixture)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 6)
	require.Contains(t, lines[4], `"name":"hold"`)
	lines[4] = strings.Replace(lines[4], `"name":"hold"`, `"name":"block"`, 1)
	return lines
}

var errHeldTooLong = errors.New("block: held for 2 s without cancel or release")

// blockTool is a tool that reports progress once, then blocks until its
// context is cancelled, the test releases it, or 2 s pass.
type blockTool struct {
	started chan struct{}
	ended   chan error // nil: released; ctx.Err(): cancelled; errHeldTooLong
	release chan struct{}
}

type blockArgs struct {
	Seconds int `json:"seconds" jsonschema:"ignored: the tool blocks until cancelled or released"`
}

func (b *blockTool) handle(ctx context.Context, req *mcp.CallToolRequest, _ blockArgs) (*mcp.CallToolResult, any, error) {
	if tok := req.Params.GetProgressToken(); tok != nil {
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "blocking", Progress: 0, Total: 1})
		if err != nil {
			return nil, nil, err
		}
	}
	b.started <- struct{}{}
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, nil, ctx.Err()
	case <-b.release:
		b.ended <- nil
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	case <-timer.C:
		b.ended <- errHeldTooLong
		return nil, nil, errHeldTooLong
	}
}

// serve connects a go-sdk server with the block tool over a stdio.Transport
// on a new rig, in the synctest bubble the test runs in (the end of In
// waits out the transport's 250 ms grace on the fake clock). At cleanup it
// ends In and waits for the session to end.
func serve(t *testing.T) (*rig, *blockTool) {
	t.Helper()
	r := newBubbleRig(t)
	tool := &blockTool{
		started: make(chan struct{}, 4),
		ended:   make(chan error, 4),
		release: make(chan struct{}),
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "bee-stdio-test", Version: "0.0.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "block", Description: "Block until cancelled or released."}, tool.handle)
	ss, err := server.Connect(t.Context(), r.transport(0), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		r.closeIn() // EOF on stdin: the session ends
		done := make(chan error, 1)
		go func() { done <- ss.Wait() }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("server session did not end after stdin closed")
		}
		_ = ss.Close()
	})
	return r, tool
}

func waitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for "+what)
		var zero T
		return zero
	}
}

// The recorded Claude Code session, Esc included, against a real go-sdk
// server: discovery and tools/list are answered, the cancelled tools/call
// gets no response, and the session carries on.
func TestTransport_ServeClaudeCodeSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, tool := serve(t)
		lines := fixtureLines(t)

		r.send(lines[0])
		probe := r.out.waitFor(t, "server/discover probe response", isResponse("server-discover-probe-1"))
		require.Contains(t, probe["result"], "supportedVersions")

		r.send(lines[1]) // subscriptions/listen: stays open
		r.send(lines[2])
		r.out.waitFor(t, "server/discover response", isResponse(0.0))

		r.send(lines[3])
		list := r.out.waitFor(t, "tools/list response", isResponse(1.0))
		tools := list["result"].(map[string]any)["tools"].([]any)
		require.Len(t, tools, 1)
		require.Equal(t, "block", tools[0].(map[string]any)["name"])

		r.send(lines[4]) // tools/call, id 2, progressToken 2
		waitSignal(t, tool.started, "the tool to start")
		prog := r.out.waitFor(t, "progress while the call is live", func(m map[string]any) bool {
			return m["method"] == "notifications/progress"
		})
		require.Equal(t, 2.0, prog["params"].(map[string]any)["progressToken"])

		r.send(lines[5]) // notifications/cancelled, requestId 2
		require.ErrorIs(t, waitSignal(t, tool.ended, "the tool to end"), context.Canceled)

		// The go-sdk still writes a response for the cancelled call; the
		// transport withholds it and hands it to OnDropped.
		d := r.nextDropped()
		require.Equal(t, mustID(t, 2), d.id)
		t.Logf("go-sdk response to the cancelled call (withheld): %s", d.result)
		require.Contains(t, string(d.result), "context canceled")

		// The session carries on, and nothing answered the cancelled id.
		r.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		r.out.waitFor(t, "ping response", isResponse(3.0))
		for _, line := range r.out.written() {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			require.False(t, isResponse(2.0)(m), "a response to the cancelled call was written: %s", line)
		}
		r.out.requireClean(t)
	})
}

// A malformed line while a tool call is in flight is answered with -32700
// and the call still completes with its response.
func TestTransport_MalformedLineDuringToolCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, tool := serve(t)
		lines := fixtureLines(t)

		r.send(lines[2])
		r.out.waitFor(t, "server/discover response", isResponse(0.0))

		r.send(lines[4])
		waitSignal(t, tool.started, "the tool to start")

		r.send("this is not json")
		reply := r.out.waitFor(t, "parse error reply", func(m map[string]any) bool { return m["error"] != nil })
		require.Nil(t, reply["id"])
		require.Equal(t, -32700.0, reply["error"].(map[string]any)["code"])

		close(tool.release)
		require.NoError(t, waitSignal(t, tool.ended, "the tool to end"))
		resp := r.out.waitFor(t, "tools/call response", isResponse(2.0))
		result := resp["result"].(map[string]any)
		require.NotEqual(t, true, result["isError"])
		require.Equal(t, "released", result["content"].([]any)[0].(map[string]any)["text"])
		r.out.requireClean(t)
	})
}
