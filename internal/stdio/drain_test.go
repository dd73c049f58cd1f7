package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/stdio"
)

// A client that writes its requests and closes stdin at once (a script,
// `printf ... | bee-mcp`) still gets every answer: the go-sdk ends the
// session when Read reports EOF, so the connection holds EOF back until
// the requests in flight are answered.
func TestTransport_AnswersInFlightAtEOF(t *testing.T) {
	r := newRig(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "bee-stdio-test", Version: "0.0.1"}, nil)
	slow := make(chan struct{})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Answer once released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-slow:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow answer"}}}, nil, nil
		})
	ss, err := server.Connect(t.Context(), r.transport(0), nil)
	require.NoError(t, err)

	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	r.closeIn()

	init := r.out.waitFor(t, "initialize response", isResponse(1.0))
	require.Contains(t, init, "result")
	close(slow)
	call := r.out.waitFor(t, "tools/call response", isResponse(2.0))
	require.Equal(t, "slow answer", call["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])

	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "the session ends at EOF once it has answered")
	case <-time.After(waitTimeout):
		require.FailNow(t, "the session did not end after its answers")
	}
}

// A request still running at the end of In (a long wait, or Claude Code's
// subscriptions/listen) is cancelled as if the client had sent a cancel,
// 250 ms (the grace for quick answers) after the end: Read hands the server
// a notifications/cancelled for it, its answer is withheld and goes to
// OnDropped, and then Read reports EOF.
func TestConnection_EOFCancelsWhatStillRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBubbleRig(t)
		h := r.connect(t, r.transport(0))
		start := time.Now()
		h.send(callLine("7", "7"), pingLine("answered"))
		h.closeIn()
		h.readRequest("tools/call", 7)
		h.readRequest("ping", "answered")
		h.write(response(t, "answered", `{}`))

		cancel := h.readRequest("notifications/cancelled", nil)
		require.Equal(t, 250*time.Millisecond, time.Since(start), "cancelled when the grace ends")
		var params struct {
			RequestID any    `json:"requestId"`
			Reason    string `json:"reason"`
		}
		require.NoError(t, json.Unmarshal(cancel.Params, &params))
		require.Equal(t, 7.0, params.RequestID)
		require.Equal(t, "stdin closed", params.Reason)

		// The server answers the cancelled call: withheld, handed back.
		h.write(response(t, 7, `{"claimed":"a-3"}`))
		d := h.nextDropped()
		require.Equal(t, mustID(t, 7), d.id)
		_, err := h.conn.Read(t.Context())
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, 250*time.Millisecond, time.Since(start), "EOF once the cancelled call is answered")
		require.Equal(t, "answered", h.out.next(t)["id"])
		h.out.requireNone(t)
	})
}

// The end of In is bounded: a request that ignores its cancel does not keep
// the connection from reporting EOF when DrainTimeout (1 s by default, or
// less than the grace) has passed since the end.
func TestConnection_EOFWaitIsBounded(t *testing.T) {
	for _, tc := range []struct {
		drain, cancelAt, eofAt time.Duration
	}{
		{0, 250 * time.Millisecond, stdio.DefaultDrainTimeout},
		{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(tc.eofAt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newBubbleRig(t)
				tr := r.transport(0)
				tr.DrainTimeout = tc.drain
				h := r.connect(t, tr)
				start := time.Now()
				h.send(pingLine("never-answered"))
				h.closeIn()
				h.readRequest("ping", "never-answered")
				h.readRequest("notifications/cancelled", nil)
				require.Equal(t, tc.cancelAt, time.Since(start))

				_, err := h.conn.Read(t.Context())
				require.ErrorIs(t, err, io.EOF)
				require.Equal(t, tc.eofAt, time.Since(start))
				require.True(t, hasLog(r.logs, "stdin closed with requests unanswered"), "the unanswered requests are logged")
			})
		})
	}
}

// Close does not wait for answers: a Read held back at EOF returns at once.
func TestConnection_CloseEndsTheEOFWait(t *testing.T) {
	r := newRig(t)
	tr := r.transport(0)
	tr.DrainTimeout = time.Hour
	h := r.connect(t, tr)
	conn := h.conn
	h.send(pingLine("in-flight"))
	h.closeIn()
	h.readRequest("ping", "in-flight")

	got := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		got <- err
	}()
	require.NoError(t, conn.Close())
	select {
	case err := <-got:
		require.ErrorIs(t, err, io.EOF)
	case <-time.After(waitTimeout):
		require.FailNow(t, "Read still waiting after Close")
	}
}

// A line over the limit is answered with the request's id when the part
// that was read shows it unambiguously: a top-level id beside a method.
func TestConnection_LineTooLongKeepsItsID(t *testing.T) {
	const limit = 1024
	pad := strings.Repeat("p", 2*limit)
	for _, tc := range []struct {
		name string
		line string
		id   any // as decoded from the reply: float64, string or nil
	}{
		{"numeric id first", `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"pad":"` + pad + `"}}`, 41.0},
		{"string id after method", `{"jsonrpc":"2.0","method":"tools/call","id":"req-7","params":{"pad":"` + pad + `"}}`, "req-7"},
		{"id only after the limit", `{"jsonrpc":"2.0","method":"tools/call","params":{"pad":"` + pad + `"},"id":9}`, nil},
		{"no method before the limit", `{"jsonrpc":"2.0","id":9,"params":{"pad":"` + pad + `"},"method":"tools/call"}`, nil},
		{"a response", `{"jsonrpc":"2.0","id":3,"method":"x","result":{"pad":"` + pad + `"}}`, nil},
		{"nested id only", `{"jsonrpc":"2.0","method":"tools/call","params":{"id":5,"pad":"` + pad + `"}}`, nil},
		{"id cut by the limit", `{"jsonrpc":"2.0","method":"tools/call","params":{},"pad":"` + strings.Repeat("q", limit-70) + `","id":123456789012}` + pad, nil},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"pad":"` + pad + `"}}`, nil},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"pad":"` + pad + `"}}`, nil},
		{"id given twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"pad":"` + pad + `"}}`, nil},
		{"not json", `garbage "id":4, "method":"x"` + pad, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, limit)
			h.send(tc.line, pingLine("next"))
			h.readRequest("ping", "next")
			reply := h.out.next(t)
			require.Equal(t, tc.id, reply["id"])
			e := reply["error"].(map[string]any)
			require.Equal(t, -32600.0, e["code"])
			require.Equal(t, "invalid request: line exceeds 1024 bytes", e["message"])
			h.out.requireNone(t)
		})
	}
}

// An over-limit line whose id is in flight is answered with a null id:
// the client must not take the error for the first request's answer.
func TestConnection_LineTooLongIDInFlight(t *testing.T) {
	h := newHarness(t, 1024)
	h.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	h.readRequest("ping", 6)
	h.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"pad":"`+strings.Repeat("p", 2048)+`"}}`, pingLine("next"))
	h.readRequest("ping", "next")
	reply := h.out.next(t)
	require.Nil(t, reply["id"])
	h.write(response(t, 6, `{}`))
	require.Equal(t, 6.0, h.out.next(t)["id"])
}

// A response the connection cannot write (stdout broken) is handed to
// OnDropped like a withheld one: what it carried never reached the client.
func TestConnection_UnwritableResponseDropped(t *testing.T) {
	r := newRig(t)
	tr := r.transport(0)
	broken := errors.New("broken pipe")
	tr.Out = failWriter{err: broken}
	h := r.connect(t, tr)
	conn := h.conn
	h.send(callLine("4", "4"))
	h.readRequest("tools/call", 4)
	err := conn.Write(t.Context(), response(t, 4, `{"claimed":"a-1"}`))
	require.ErrorIs(t, err, broken)
	d := r.nextDropped()
	require.Equal(t, mustID(t, 4), d.id)
	require.JSONEq(t, `{"claimed":"a-1"}`, string(d.result))

	// After Close, a response for a request still in flight is dropped too.
	h.send(callLine("5", "5"))
	h.readRequest("tools/call", 5)
	require.NoError(t, conn.Close())
	err = conn.Write(t.Context(), response(t, 5, `{"claimed":"a-2"}`))
	require.ErrorIs(t, err, mcp.ErrConnectionClosed)
	d = r.nextDropped()
	require.Equal(t, mustID(t, 5), d.id)
	require.JSONEq(t, `{"claimed":"a-2"}`, string(d.result))
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }
