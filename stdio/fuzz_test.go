package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/stdio"
)

// FuzzTransport_Line feeds arbitrary bytes as one line, then a valid ping.
// Whatever the line holds, the connection must not panic, Out must carry
// only whole JSON-RPC lines, and the ping must still be delivered.
func FuzzTransport_Line(f *testing.F) {
	for _, seed := range []string{
		"",
		"garbage",
		"\x00\xff\xfe",
		"{",
		"}",
		"[]",
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-0.0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":[{"b":null}]},"method":{"x":[]},"params":[[[[{}]]]]}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `}`,
		`{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"fuzz-ping"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
		strings.Repeat("z", 5000),
	} {
		f.Add([]byte(seed))
	}
	fixture, err := os.ReadFile(clientFixture)
	require.NoError(f, err)
	for line := range bytes.Lines(fixture) {
		f.Add(bytes.TrimSuffix(line, []byte("\n")))
	}

	f.Fuzz(func(t *testing.T, line []byte) {
		const pingID = "fuzz-ping"
		in := io.MultiReader(bytes.NewReader(line), strings.NewReader("\n"+pingLine(pingID)+"\n"))
		out := newOutRecorder()
		conn, err := (&stdio.Transport{In: in, Out: out, MaxLineBytes: 4096}).Connect(t.Context())
		require.NoError(t, err)
		defer conn.Close()

		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		sawPing := false
		for {
			msg, err := conn.Read(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			req, ok := msg.(*jsonrpc.Request)
			if !ok {
				continue
			}
			if req.Method == "ping" && req.ID == mustID(t, pingID) {
				sawPing = true
			}
			if req.IsCall() {
				// Answer it, so that a request in the fuzzed line cannot hold
				// the ping's id in flight.
				require.NoError(t, conn.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)}))
			}
		}
		require.True(t, sawPing, "the ping after the fuzzed line was not delivered")
		out.requireClean(t)
	})
}
