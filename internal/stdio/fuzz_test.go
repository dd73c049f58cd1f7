package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/stdio"
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

var (
	simpleIntID    = regexp.MustCompile(`^-?[1-9][0-9]{0,14}$`)
	simpleStringID = regexp.MustCompile(`^"[a-zA-Z0-9_-]{0,20}"$`)
)

// FuzzTransport_LongLine feeds a request line over the limit whose id (and
// some text after its method) are fuzzed, then a ping. The connection must
// not panic, must answer the long line with -32600 on a clean line, must
// still deliver the ping, and may name an id in that answer only if it is
// a valid one; a plain integer or string id must be named.
func FuzzTransport_LongLine(f *testing.F) {
	for _, seed := range []struct{ id, junk string }{
		{"7", ""}, {`"req-1"`, ""}, {"1.5", ""}, {"null", ""}, {"true", ""}, {"{}", ""},
		{`7,"id":8`, ""}, {`"x"`, `","result":{`}, {"9007199254740993", ""}, {"-0", ""},
		{`"\u0041"`, ""}, {`"a`, ""}, {"", ""}, {`1}`, `{`},
	} {
		f.Add(seed.id, seed.junk)
	}
	const limit = 1024
	pad := strings.Repeat("p", 2*limit)

	f.Fuzz(func(t *testing.T, idRaw, junk string) {
		idRaw = strings.ReplaceAll(idRaw, "\n", " ")
		junk = strings.ReplaceAll(junk, "\n", " ")
		line := `{"jsonrpc":"2.0","id":` + idRaw + `,"method":"tools/call","params":{"a":"` + junk + `","pad":"` + pad + `"}}`
		in := strings.NewReader(line + "\n" + pingLine("fuzz-ping") + "\n")
		out := newOutRecorder()
		conn, err := (&stdio.Transport{In: in, Out: out, MaxLineBytes: limit, DrainTimeout: -1}).Connect(t.Context())
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
			if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "ping" {
				sawPing = true
			}
		}
		require.True(t, sawPing, "the ping after the long line was not delivered")
		out.requireClean(t)

		var reply *struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		for _, l := range out.written() {
			if strings.Contains(l, "line exceeds") {
				require.Nil(t, reply, "the long line was answered twice")
				require.NoError(t, json.Unmarshal([]byte(l), &reply))
			}
		}
		require.NotNil(t, reply, "the long line was not answered")
		require.Equal(t, -32600, reply.Error.Code)
		got := string(reply.ID)
		switch {
		case got == "null":
		case got[0] == '"':
		default:
			n, err := strconv.ParseInt(got, 10, 64)
			require.NoError(t, err, "reply id %s is neither a string nor an integer", got)
			require.LessOrEqual(t, max(n, -n), int64(1<<53-1), "reply id %s out of range", got)
		}
		if plain := !strings.ContainsAny(junk, `"\`); plain && (simpleIntID.MatchString(idRaw) || simpleStringID.MatchString(idRaw)) {
			require.Equal(t, idRaw, got, "a plain id read before the limit must be named")
		}
	})
}
