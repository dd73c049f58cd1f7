package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/stdio"
)

func TestTransport_ConnectOnce(t *testing.T) {
	r := newRig(t)
	tr := r.transport(0)
	conn, err := tr.Connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	again, err := tr.Connect(t.Context())
	require.ErrorIs(t, err, stdio.ErrAlreadyConnected)
	require.Nil(t, again)
}

func TestTransport_ConnectRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   *stdio.Transport
	}{
		{"no in", &stdio.Transport{Out: io.Discard}},
		{"no out", &stdio.Transport{In: strings.NewReader("")}},
		{"negative limit", &stdio.Transport{In: strings.NewReader(""), Out: io.Discard, MaxLineBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tc.tr.Connect(t.Context())
			require.Error(t, err)
			require.Nil(t, conn)
		})
	}
}

// Connection doc: "calling Close should unblock a Read waiting for input".
func TestConnection_ReadUnblockedByClose(t *testing.T) {
	h := newHarness(t, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := h.conn.Read(context.Background())
		errc <- err
	}()
	require.NoError(t, h.conn.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, io.EOF)
	case <-time.After(waitTimeout):
		require.FailNow(t, "Read still blocked after Close")
	}
	// The cleanup's goleak check proves the reading goroutine, blocked in
	// In's Read, ended too.
}

// Connection doc: "Write may be called concurrently". Every Write must
// reach Out as one whole line, also while Read writes error replies.
func TestConnection_WriteConcurrentWholeLines(t *testing.T) {
	h := newHarness(t, 0)
	const writers, perWriter, badLines = 16, 25, 50
	big := strings.Repeat("x", 4<<10)

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				params, err := json.Marshal(map[string]any{"w": w, "i": i, "pad": big})
				require.NoError(t, err)
				require.NoError(t, h.conn.Write(t.Context(), &jsonrpc.Request{Method: "notifications/message", Params: params}))
			}
		})
	}
	for range badLines {
		h.send("not json at all")
	}
	h.send(pingLine("after-bad-lines"))
	h.readRequest("ping", "after-bad-lines")
	wg.Wait()

	lines := h.out.written()
	require.Len(t, lines, writers*perWriter+badLines)
	parseErrors := 0
	for _, l := range lines {
		if strings.Contains(l, `"code":-32700`) {
			parseErrors++
		}
	}
	require.Equal(t, badLines, parseErrors)
	h.out.requireClean(t)
}

// Connection doc: "Close may be called multiple times, potentially
// concurrently".
func TestConnection_CloseConcurrent(t *testing.T) {
	inR, inW := io.Pipe()
	t.Cleanup(func() { _ = inW.Close() })
	in := &countingCloser{PipeReader: inR, err: errors.New("close failed")}
	conn, err := (&stdio.Transport{In: in, Out: io.Discard}).Connect(t.Context())
	require.NoError(t, err)

	const callers = 20
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { errs <- conn.Close() })
	}
	wg.Wait()
	close(errs)
	var failed int
	for err := range errs {
		if err != nil {
			failed++
			require.ErrorIs(t, err, in.err, "the first Close reports In's Close error")
		}
	}
	require.Equal(t, 1, failed, "only the first Close returns In's error")
	require.Equal(t, int32(1), in.closes.Load(), "In is closed exactly once")
	require.NoError(t, conn.Close(), "a later Close returns nil")
}

type countingCloser struct {
	*io.PipeReader
	closes atomic.Int32
	err    error
}

func (c *countingCloser) Close() error {
	c.closes.Add(1)
	_ = c.PipeReader.Close()
	return c.err
}

// Connection doc: Close "is implicitly called whenever a Read or Write
// fails", so after Close both must fail.
func TestConnection_ReadWriteAfterClose(t *testing.T) {
	h := newHarness(t, 0)
	h.send(pingLine("queued"))
	require.NoError(t, h.conn.Close())

	_, err := h.conn.Read(t.Context())
	require.ErrorIs(t, err, io.EOF)

	err = h.conn.Write(t.Context(), response(t, 1, `{}`))
	require.ErrorIs(t, err, mcp.ErrConnectionClosed)
	h.out.requireNone(t)
}

func TestConnection_SessionID(t *testing.T) {
	h := newHarness(t, 0)
	require.Empty(t, h.conn.SessionID())
}

func TestConnection_ReadEndOfInput(t *testing.T) {
	t.Run("eof after lines, last line unterminated", func(t *testing.T) {
		h := newHarness(t, 0)
		h.send(pingLine("one"))
		h.sendRaw(pingLine("two")) // no "\n" before EOF
		h.closeIn()
		h.readRequest("ping", "one")
		h.readRequest("ping", "two")
		// Answered, so the end of In is reported at once (see drain_test.go).
		h.write(response(t, "one", `{}`))
		h.write(response(t, "two", `{}`))
		_, err := h.conn.Read(t.Context())
		require.ErrorIs(t, err, io.EOF)
		_, err = h.conn.Read(t.Context())
		require.ErrorIs(t, err, io.EOF, "Read keeps returning EOF")
	})
	t.Run("in fails", func(t *testing.T) {
		boom := errors.New("boom")
		conn, err := (&stdio.Transport{In: iotest.ErrReader(boom), Out: io.Discard}).Connect(t.Context())
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Read(t.Context())
		require.ErrorIs(t, err, boom)
	})
}

func TestConnection_ReadContextDone(t *testing.T) {
	h := newHarness(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.send(pingLine("kept"))
	_, err := h.conn.Read(ctx)
	require.ErrorIs(t, err, context.Canceled)
	h.readRequest("ping", "kept") // not lost by the cancelled Read
}

// Each malformed line gets its error reply and the next valid message on the
// same connection is still read.
func TestConnection_ReadMalformedLine(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"a":` +
		strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}}`
	for _, tc := range []struct {
		name    string
		line    string
		code    float64
		id      any // nil, float64 or string, as decoded from the reply
		message string
	}{
		{"not json", `hello`, -32700, nil, "parse error"},
		{"truncated json", `{"jsonrpc":"2.0","id":1,`, -32700, nil, "parse error"},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, -32700, nil, "parse error"},
		{"two objects on one line", `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`, -32700, nil, "parse error"},
		{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", -32700, nil, "UTF-8"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, nil, "batches are not supported"},
		{"empty batch", `[]`, -32600, nil, "batches are not supported"},
		{"number", `42`, -32600, nil, "JSON object"},
		{"string", `"ping"`, -32600, nil, "JSON object"},
		{"null", `null`, -32600, nil, "JSON object"},
		{"empty object", `{}`, -32600, nil, `"jsonrpc"`},
		{"missing jsonrpc", `{"id":1,"method":"ping"}`, -32600, 1.0, `"jsonrpc"`},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600, 1.0, `"jsonrpc"`},
		{"jsonrpc as number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, -32600, 1.0, `"jsonrpc"`},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, nil, `"id"`},
		{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil, `"id"`},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, -32600, nil, `"id"`},
		{"id null on request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, nil, "not null"},
		{"id fractional", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, nil, "integer"},
		{"id huge", `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, -32600, nil, "representable"},
		{"id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, -32600, nil, "out of range"},
		{"method not a string", `{"jsonrpc":"2.0","id":"abc","method":5}`, -32600, "abc", `"method"`},
		{"params a string", `{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}`, -32600, 7.0, `"params"`},
		{"params null", `{"jsonrpc":"2.0","id":7,"method":"ping","params":null}`, -32600, 7.0, `"params"`},
		{"params a number", `{"jsonrpc":"2.0","id":7,"method":"ping","params":3}`, -32600, 7.0, `"params"`},
		{"request with result", `{"jsonrpc":"2.0","id":7,"method":"ping","result":{}}`, -32600, 7.0, `"result"`},
		{"neither request nor response", `{"jsonrpc":"2.0","id":3}`, -32600, 3.0, "neither"},
		{"response with result and error", `{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"m"}}`, -32600, 3.0, "both"},
		{"response error not an object", `{"jsonrpc":"2.0","id":3,"error":"boom"}`, -32600, 3.0, `"error"`},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, -32600, nil, "id"},
		{"duplicate member", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, -32600, nil, "more than once"},
		{"nested deeper than the sdk decodes", deep, -32600, 8.0, "could not be decoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			h.send(tc.line, pingLine("next"))
			h.readRequest("ping", "next")

			reply := h.out.next(t)
			require.Equal(t, "2.0", reply["jsonrpc"])
			require.Contains(t, reply, "id")
			require.Equal(t, tc.id, reply["id"])
			e, ok := reply["error"].(map[string]any)
			require.True(t, ok, "reply %v has no error object", reply)
			require.Equal(t, tc.code, e["code"])
			require.Contains(t, e["message"], tc.message)
			h.out.requireNone(t)
		})
	}
}

// Messages that must not be answered (a valid error response nobody can
// route, a cancellation naming no valid id) are dropped with a log only.
func TestConnection_ReadDropsUnanswerable(t *testing.T) {
	for _, tc := range []struct{ name, line, log string }{
		{"error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, "stdin error response without id dropped"},
		{"cancellation with fractional id", cancelLine("1.5"), "stdin cancellation without a valid request id dropped"},
		{"cancellation without id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, "stdin cancellation without a valid request id dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			h.send(tc.line, pingLine("next"))
			h.readRequest("ping", "next")
			h.out.requireNone(t)
			require.True(t, hasLog(h.logs, tc.log), "no %q log", tc.log)
		})
	}
}

func TestConnection_ReadSkipsBlankLinesAndCR(t *testing.T) {
	h := newHarness(t, 0)
	h.sendRaw("\n   \t\n\r\n")
	h.sendRaw(pingLine("crlf") + "\r\n")
	h.readRequest("ping", "crlf")
	h.out.requireNone(t)
}

func TestConnection_ReadLineTooLong(t *testing.T) {
	const limit = 1024
	h := newHarness(t, limit)

	// Exactly at the limit: read. One byte more: rejected.
	atLimit := padPing("at-limit", limit)
	require.Len(t, atLimit, limit)
	h.send(atLimit)
	h.readRequest("ping", "at-limit")

	h.send(padPing("over-limit", limit+1), pingLine("next"))
	h.readRequest("ping", "next")
	reply := h.out.next(t)
	require.Equal(t, "over-limit", reply["id"], "the id read before the limit")
	e := reply["error"].(map[string]any)
	require.Equal(t, -32600.0, e["code"])
	require.Equal(t, "invalid request: line exceeds 1024 bytes", e["message"])

	h.send(strings.Repeat("y", 10*limit), pingLine("after-garbage"))
	h.readRequest("ping", "after-garbage")
	require.Equal(t, -32600.0, h.out.next(t)["error"].(map[string]any)["code"])
	h.out.requireNone(t)
}

// padPing returns a ping request line of exactly n bytes.
func padPing(id string, n int) string {
	head := `{"jsonrpc":"2.0","id":"` + id + `","method":"ping","params":{"pad":"`
	tail := `"}}`
	return head + strings.Repeat("p", n-len(head)-len(tail)) + tail
}

// An oversized line is discarded as it is read, not buffered: reading past a
// 64 MiB line allocates far less than 64 MiB.
func TestConnection_ReadLineTooLongNotBuffered(t *testing.T) {
	const lineBytes = 64 << 20
	in := &longLineReader{remaining: lineBytes, tail: strings.NewReader("\n" + pingLine("after-huge") + "\n")}
	out := newOutRecorder()
	conn, err := (&stdio.Transport{In: in, Out: out, MaxLineBytes: 4096}).Connect(t.Context())
	require.NoError(t, err)
	defer conn.Close()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	msg, err := conn.Read(t.Context())
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, "ping", msg.(*jsonrpc.Request).Method)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "the long line was buffered")
	require.Equal(t, -32600.0, out.next(t)["error"].(map[string]any)["code"])
	out.requireClean(t)
}

// longLineReader yields remaining bytes of 'x' without allocating, then tail.
type longLineReader struct {
	remaining int
	tail      io.Reader
}

var xs = bytes.Repeat([]byte("x"), 64<<10)

func (r *longLineReader) Read(p []byte) (int, error) {
	if r.remaining == 0 {
		return r.tail.Read(p)
	}
	n := copy(p[:min(len(p), r.remaining)], xs)
	r.remaining -= n
	return n, nil
}

func TestConnection_ReadDuplicateInFlightID(t *testing.T) {
	h := newHarness(t, 0)
	h.send(callLine("5", "5"))
	h.readRequest("tools/call", 5)

	// The same id again while 5 is in flight: answered, not delivered.
	h.send(callLine("5", "55"), pingLine("next"))
	h.readRequest("ping", "next")
	reply := h.out.next(t)
	require.Nil(t, reply["id"], "the reply must not look like the answer to the first request 5")
	e := reply["error"].(map[string]any)
	require.Equal(t, -32600.0, e["code"])
	require.Contains(t, e["message"], "request id 5 is already in flight")
	require.True(t, hasLog(h.logs, "stdin request id already in flight"))

	// A string id that collides with one in flight.
	h.send(pingLine("s"), pingLine("s"), pingLine("next2"))
	h.readRequest("ping", "s")
	h.readRequest("ping", "next2")
	require.Contains(t, h.out.next(t)["error"].(map[string]any)["message"], `request id "s" is already in flight`)

	// Once answered, the id may be used again.
	h.write(response(t, 5, `{}`))
	require.Equal(t, 5.0, h.out.next(t)["id"])
	h.send(callLine("5", "5"))
	h.readRequest("tools/call", 5)
	h.out.requireNone(t)
}

func TestConnection_ReadClientResponse(t *testing.T) {
	h := newHarness(t, 0)
	h.send(`{"jsonrpc":"2.0","id":"srv-1","result":{"ok":true}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"nope"}}`)

	resp, ok := h.read().(*jsonrpc.Response)
	require.True(t, ok)
	require.Equal(t, mustID(t, "srv-1"), resp.ID)
	require.JSONEq(t, `{"ok":true}`, string(resp.Result))
	require.NoError(t, resp.Error)

	resp, ok = h.read().(*jsonrpc.Response)
	require.True(t, ok)
	require.Equal(t, mustID(t, 7), resp.ID)
	var wireErr *jsonrpc.Error
	require.ErrorAs(t, resp.Error, &wireErr)
	require.Equal(t, int64(-32601), wireErr.Code)
	h.out.requireNone(t)
}

// Rejected lines are logged at warn with a fixed message and a short prefix,
// never the whole line.
func TestConnection_ReadLogsRejectedLine(t *testing.T) {
	h := newHarness(t, 256)
	secret := "SECRET-TAIL"
	h.send("not json "+strings.Repeat("a", 100)+secret,
		strings.Repeat("b", 300)+secret,
		pingLine("next"))
	h.readRequest("ping", "next")

	var sawParse, sawLong bool
	for _, rec := range h.logs.all() {
		for k, v := range rec.attrs {
			require.NotContains(t, v, secret, "attribute %q of %q logs too much of the line", k, rec.msg)
		}
		switch rec.msg {
		case "stdin line is not json":
			sawParse = true
			require.Equal(t, "WARN", rec.level.String())
			require.True(t, strings.HasPrefix(rec.attrs["prefix"], "not json aaa"))
		case "stdin line too long":
			sawLong = true
			require.Equal(t, "WARN", rec.level.String())
			require.Equal(t, "311", rec.attrs["bytes"])
			require.Equal(t, "256", rec.attrs["limit"])
		}
	}
	require.True(t, sawParse)
	require.True(t, sawLong)
}

func hasLog(l *logRecorder, msg string) bool {
	for _, rec := range l.all() {
		if rec.msg == msg {
			return true
		}
	}
	return false
}

func TestConnection_WriteWithholdsCancelledResponse(t *testing.T) {
	h := newHarness(t, 0)
	h.send(callLine("9", "9"), callLine("10", "10"), callLine("11", "11"))
	h.readRequest("tools/call", 9)
	h.readRequest("tools/call", 10)
	h.readRequest("tools/call", 11)

	// The cancellation still reaches the server, which cancels the handler.
	h.send(cancelLine("9"), cancelLine("11"))
	h.readRequest("notifications/cancelled", nil)
	h.readRequest("notifications/cancelled", nil)

	h.write(progress("9")) // progress for a cancelled call: dropped
	h.out.requireNone(t)

	h.write(response(t, 9, `{"content":[{"type":"text","text":"claimed #42"}]}`))
	h.out.requireNone(t)
	d := h.nextDropped()
	require.Equal(t, mustID(t, 9), d.id)
	require.JSONEq(t, `{"content":[{"type":"text","text":"claimed #42"}]}`, string(d.result))

	// A cancelled call answered with an error: withheld, no result.
	h.write(&jsonrpc.Response{ID: mustID(t, 11), Error: &jsonrpc.Error{Code: -32603, Message: "context canceled"}})
	h.out.requireNone(t)
	d = h.nextDropped()
	require.Equal(t, mustID(t, 11), d.id)
	require.Nil(t, d.result)

	// An uncancelled call is answered.
	h.write(response(t, 10, `{"content":[]}`))
	require.Equal(t, 10.0, h.out.next(t)["id"])
	require.True(t, hasLog(h.logs, "response withheld: request was cancelled"))

	// A cancellation for an id never seen changes nothing.
	h.send(cancelLine("77"), callLine("9", "9"))
	h.readRequest("notifications/cancelled", nil)
	h.readRequest("tools/call", 9) // the withheld id is free again
	h.write(response(t, 9, `{}`))
	require.Equal(t, 9.0, h.out.next(t)["id"])
	h.requireNoDrop()
}

// A cancel that crosses its response on the wire: the client discards the
// response it reads after cancelling, so the response counts as dropped.
func TestConnection_LateCancelDropsWrittenResponse(t *testing.T) {
	h := newHarness(t, 0)
	h.send(callLine("5", "5"), callLine("6", "6"))
	h.readRequest("tools/call", 5)
	h.readRequest("tools/call", 6)
	h.write(response(t, 5, `{"structuredContent":{"records":[{"id":"a-1"}]}}`))
	h.write(response(t, 6, `{}`))
	require.Equal(t, 5.0, h.out.next(t)["id"])
	require.Equal(t, 6.0, h.out.next(t)["id"])

	h.send(cancelLine("5"))
	h.readRequest("notifications/cancelled", nil)
	d := h.nextDropped()
	require.Equal(t, mustID(t, 5), d.id)
	require.JSONEq(t, `{"structuredContent":{"records":[{"id":"a-1"}]}}`, string(d.result))

	// Once only: a second cancel for the same id changes nothing.
	h.send(cancelLine("5"), callLine("7", "7"))
	h.readRequest("notifications/cancelled", nil)
	h.readRequest("tools/call", 7)
	h.requireNoDrop()

	// The client reuses id 6: a late cancel of 6 now means the new answer.
	h.send(callLine("6", "6"))
	h.readRequest("tools/call", 6)
	h.write(response(t, 6, `{"second":true}`))
	require.Equal(t, 6.0, h.out.next(t)["id"])
	h.send(cancelLine("6"))
	h.readRequest("notifications/cancelled", nil)
	d = h.nextDropped()
	require.Equal(t, mustID(t, 6), d.id)
	require.JSONEq(t, `{"second":true}`, string(d.result))
}

func TestConnection_LateCancelWindowOff(t *testing.T) {
	r := newRig(t)
	tr := r.transport(0)
	tr.LateCancelWindow = -1
	h := r.connect(t, tr)
	h.send(callLine("5", "5"))
	h.readRequest("tools/call", 5)
	h.write(response(t, 5, `{}`))
	require.Equal(t, 5.0, h.out.next(t)["id"])
	h.send(cancelLine("5"), callLine("8", "8"))
	h.readRequest("notifications/cancelled", nil)
	h.readRequest("tools/call", 8)
	h.requireNoDrop()
}

func TestConnection_WriteDropsProgressAfterResponse(t *testing.T) {
	h := newHarness(t, 0)
	h.send(callLine("1", `"tok-1"`), callLine("2", "2.0"))
	h.readRequest("tools/call", 1)
	h.readRequest("tools/call", 2)

	h.write(progress(`"tok-1"`))
	p := h.out.next(t)
	require.Equal(t, "notifications/progress", p["method"])
	require.Equal(t, "tok-1", p["params"].(map[string]any)["progressToken"])

	h.write(response(t, 1, `{}`))
	require.Equal(t, 1.0, h.out.next(t)["id"])

	h.write(progress(`"tok-1"`)) // after its response: dropped
	h.write(progress(`"never-sent"`))
	h.out.requireNone(t)
	require.True(t, hasLog(h.logs, "progress dropped: its request is not live"))

	// The token 2.0 comes back from the go-sdk as 2: still the same token.
	h.write(progress("2"))
	require.Equal(t, "notifications/progress", h.out.next(t)["method"])
	h.write(response(t, 2, `{}`))
	require.Equal(t, 2.0, h.out.next(t)["id"])
	h.write(progress("2"))
	h.out.requireNone(t)
}

// A late cancel drops the response it crosses up to LateCancelWindow after
// the response was written, to the fake-clock instant, and not after.
func TestConnection_LateCancelWindowEdge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		window  time.Duration // 0: DefaultLateCancelWindow
		after   time.Duration
		dropped bool
	}{
		{"default, at the window", 0, stdio.DefaultLateCancelWindow, true},
		{"default, past the window", 0, stdio.DefaultLateCancelWindow + time.Nanosecond, false},
		{"50ms, at the window", 50 * time.Millisecond, 50 * time.Millisecond, true},
		{"50ms, past the window", 50 * time.Millisecond, 50*time.Millisecond + time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newBubbleRig(t)
				tr := r.transport(0)
				tr.LateCancelWindow = tc.window
				h := r.connect(t, tr)
				h.send(callLine("5", "5"))
				h.readRequest("tools/call", 5)
				h.write(response(t, 5, `{}`))
				require.Equal(t, 5.0, h.out.next(t)["id"])
				time.Sleep(tc.after)
				h.send(cancelLine("5"), callLine("8", "8"))
				h.readRequest("notifications/cancelled", nil)
				h.readRequest("tools/call", 8)
				synctest.Wait()
				if tc.dropped {
					require.Equal(t, mustID(t, 5), h.nextDropped().id)
				} else {
					h.requireNoDrop()
				}
			})
		})
	}
}
