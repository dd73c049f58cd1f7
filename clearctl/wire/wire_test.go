package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestStatusError_Error(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  StatusError
		want string
	}{
		{StatusError{Code: 401}, "retire: bridge answered 401 Unauthorized"},
		{StatusError{Code: 202, Body: `{"status":"running"}`}, `retire: bridge answered 202 Accepted: {"status":"running"}`},
		{StatusError{Code: 500, Body: `{"error":"x"}`}, `retire: bridge answered 500 Internal Server Error: {"error":"x"}`},
	} {
		require.Equal(t, tc.want, tc.err.Error())
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"error":"a b"}`, errorText([]byte("  {\"error\":\"a\n b\"}\n")))
	require.Equal(t, "a\uFFFDb", errorText([]byte("a\xffb")))

	long := errorText([]byte(strings.Repeat("é", maxStatusBodyBytes)))
	require.True(t, strings.HasSuffix(long, "…"))
	require.LessOrEqual(t, len(long), maxStatusBodyBytes+len("…"))
	require.Equal(t, strings.Repeat("é", maxStatusBodyBytes/2)+"…", long, "cut on a rune boundary")
}

const testToken = "3f9c0a7e5b1d4c2a8e6f0b9d7c5a3e1f-test-token"

// TestMain fails the run if any test leaves a goroutine behind: a
// cancelled call must leave nothing waiting on its context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawServer accepts connections on 127.0.0.1 and hands each to serve, which
// reads the request and writes whatever it likes; it returns the port and
// the requests received, as they came.
func rawServer(t *testing.T, serve func(c net.Conn, req string)) (int, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	reqs := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				req := readRequest(c)
				reqs <- req
				serve(c, req)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).Port, reqs
}

// readRequest reads an HTTP request's headers and, by its Content-Length,
// its body.
func readRequest(c net.Conn) string {
	br := bufio.NewReader(c)
	var b strings.Builder
	n := 0
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil || line == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	body := make([]byte, n)
	_, _ = io.ReadFull(br, body)
	b.Write(body)
	return b.String()
}

func reply(s string) func(net.Conn, string) {
	return func(c net.Conn, _ string) { _, _ = io.WriteString(c, s) }
}

// What goes on the wire: one HTTP/1.0 POST to the route, the token in the
// Authorization header only.
func TestPost_Request(t *testing.T) {
	t.Parallel()
	port, reqs := rawServer(t, reply("HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\n{\"allow\":true}"))
	a, err := CheckPaths(t.Context(), port, testToken, CheckPathsRequest{Paths: []string{"/r/x"}, Tool: "Write"})
	require.NoError(t, err)
	require.Equal(t, CheckPathsAnswer{Allow: true}, a)
	body := `{"paths":["/r/x"],"tool":"Write"}`
	require.Equal(t, "POST /check-paths HTTP/1.0\r\n"+
		"Host: 127.0.0.1:"+strconv.Itoa(port)+"\r\n"+
		"Authorization: Bearer "+testToken+"\r\n"+
		"Content-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body, <-reqs)
}

// The answers a client may get, read as a bridge's or refused.
func TestPost_Answers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		serve func(net.Conn, string)
		want  WaitResponse
		is    error  // the error wraps it
		text  string // the error holds it
		code  int    // a StatusError's
	}{
		{name: "length", serve: reply("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 15\r\n\r\n{\"wake\":false}\n"),
			want: WaitResponse{}},
		{name: "to the end", serve: reply("HTTP/1.0 200 OK\r\n\r\n{\"wake\":true,\"line\":\"bee: a-1\"}"),
			want: WaitResponse{Wake: true, Line: "bee: a-1"}},
		{name: "more than its length", serve: reply("HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\n{\"wake\":false}garbage"),
			want: WaitResponse{}},
		{name: "status", serve: reply("HTTP/1.0 404 Not Found\r\nContent-Length: 19\r\n\r\n404 page not found\n"),
			code: 404, text: "wait for work: bridge answered 404 Not Found: 404 page not found"},
		{name: "odd status", serve: reply("HTTP/1.0 418 I'm a teapot\r\n\r\n"),
			code: 418, text: "wait for work: bridge answered 418"},
		{name: "cut short", serve: reply("HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\n{\"wake\""), is: ErrConnectionLost},
		{name: "headers cut short", serve: reply("HTTP/1.0 200 OK\r\nContent-Le"), is: ErrConnectionLost},
		{name: "closed at once", serve: func(net.Conn, string) {}, is: ErrConnectionLost},
		{name: "not HTTP", serve: reply("SSH-2.0-OpenSSH_9.2\r\n\r\n"), is: ErrNotABridge, text: `the answer begins "SSH-2.0-OpenSSH_9.2"`},
		{name: "chunked", serve: reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ne\r\n{\"wake\":false}\r\n0\r\n\r\n"),
			is: ErrNotABridge, text: "chunked"},
		{name: "bad length", serve: reply("HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n"), is: ErrNotABridge},
		{name: "endless headers", serve: func(c net.Conn, _ string) {
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n")
			for range 100 {
				if _, err := io.WriteString(c, "X-Pad: "+strings.Repeat("a", 1000)+"\r\n"); err != nil {
					return
				}
			}
		}, is: ErrNotABridge, text: "headers over 65536 bytes"},
		{name: "huge body", serve: func(c net.Conn, _ string) {
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\n{\"wake\":false,\"reason\":\""+strings.Repeat("r", 200<<10)+"\"}")
		}, is: ErrNotABridge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port, _ := rawServer(t, tc.serve)
			got, err := WaitForWork(t.Context(), port, testToken, WaitRequest{})
			switch {
			case tc.code != 0:
				se, ok := errors.AsType[*StatusError](err)
				require.True(t, ok, "got %v", err)
				require.Equal(t, tc.code, se.Code)
				require.Equal(t, tc.text, err.Error())
			case tc.is != nil:
				require.ErrorIs(t, err, tc.is)
				if tc.text != "" {
					require.ErrorContains(t, err, tc.text)
				}
				require.NotContains(t, err.Error(), testToken)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
		})
	}
}

// A call whose context is cancelled (no deadline) while the bridge holds
// it returns at once, with the context's error, and leaves nothing behind
// (TestMain's goleak).
func TestPost_Cancelled(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	port, _ := rawServer(t, func(c net.Conn, _ string) {
		close(held)
		_, _ = c.Read(make([]byte, 1)) // until the client hangs up
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := WaitForWork(ctx, port, testToken, WaitRequest{})
		errc <- err
	}()
	<-held
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 2*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForWork did not return when its context was cancelled")
	}
}

// A deadline bounds every step: a bridge that never answers, and one that
// accepts nothing (its backlog full) alike.
func TestPost_Deadline(t *testing.T) {
	t.Parallel()
	port, _ := rawServer(t, func(c net.Conn, _ string) { _, _ = c.Read(make([]byte, 1)) })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Retire(ctx, port, testToken, RetireRequest{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)

	ctx, cancel = context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	_, err = Retire(ctx, port, testToken, RetireRequest{})
	require.ErrorIs(t, err, context.DeadlineExceeded, "an ended context makes no connection")
}

func TestPost_Refused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	_, err = CheckPaths(t.Context(), port, testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
	require.ErrorIs(t, err, ErrNotListening)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.True(t, strings.HasPrefix(err.Error(), "retire: bridge not listening on 127.0.0.1:"+strconv.Itoa(port)), err.Error())
}

// A token that would break the request's headers is refused before any
// connection.
func TestCheckTarget(t *testing.T) {
	t.Parallel()
	for token, want := range map[string]string{
		"":                     "retire: empty token",
		"abc\r\nX-Evil: 1":     "retire: the token holds a space, a line break or a byte that is not ASCII; the run file is damaged",
		"a b":                  "retire: the token holds a space, a line break or a byte that is not ASCII; the run file is damaged",
		"t\u00e9":              "retire: the token holds a space, a line break or a byte that is not ASCII; the run file is damaged",
		testToken + "\x00tail": "retire: the token holds a space, a line break or a byte that is not ASCII; the run file is damaged",
	} {
		_, err := Retire(t.Context(), 1, token, RetireRequest{})
		require.EqualError(t, err, want)
	}
	_, err := Retire(t.Context(), 70000, testToken, RetireRequest{})
	require.EqualError(t, err, "retire: bad port 70000")
}
