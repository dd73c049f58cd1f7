package clearctl

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetire_Loopback(t *testing.T) {
	t.Parallel()
	r := &recordingRetirer{}
	s := newTestServer(t, r, nil)

	resp, err := Retire(t.Context(), s.Port(), testToken, RetireRequest{SessionID: "s-1", TranscriptPath: "/t/s-1.jsonl"})
	require.NoError(t, err)
	require.Equal(t, RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, resp)
	got, n := r.lastRequest()
	require.Equal(t, 1, n)
	require.Equal(t, RetireRequest{SessionID: "s-1", TranscriptPath: "/t/s-1.jsonl"}, got)

	_, err = Retire(t.Context(), s.Port(), "wrong-"+testToken, RetireRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 401, se.Code)
	require.Empty(t, se.Body)
	require.Equal(t, "retire: bridge answered 401 Unauthorized", err.Error())
	require.NotContains(t, err.Error(), testToken)
	_, n = r.lastRequest()
	require.Equal(t, 1, n, "a wrong token must not retire")
}

func TestRetire_StillRunning(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	completed := make(chan struct{})
	s := newTestServer(t, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
		defer close(completed)
		<-release
		return RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, nil
	}), &Options{AnswerWithin: 100 * time.Millisecond})

	_, err := Retire(t.Context(), s.Port(), testToken, RetireRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 202, se.Code)
	require.Equal(t, `retire: bridge answered 202 Accepted: {"status":"running"}`, err.Error())

	close(release)
	recv(t, completed)
}

func TestRetire_Failed(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
		return RetireResponse{}, errors.New("board locked")
	}), nil)
	_, err := Retire(t.Context(), s.Port(), testToken, RetireRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 500, se.Code)
	require.Equal(t, `{"error":"board locked"}`, se.Body)
}

func TestRetire_NotListening(t *testing.T) {
	t.Parallel()
	s := New(testToken, &recordingRetirer{}, nil)
	require.NoError(t, s.Start())
	port := s.Port()
	require.NoError(t, s.Close())

	_, err := Retire(t.Context(), port, testToken, RetireRequest{})
	require.ErrorIs(t, err, ErrNotListening)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.True(t, strings.HasPrefix(err.Error(), "retire: bridge not listening on 127.0.0.1:"), err.Error())
	require.NotContains(t, err.Error(), testToken)
}

func TestRetire_ContextDeadline(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, RetirerFunc(func(ctx context.Context, _ RetireRequest) (RetireResponse, error) {
		<-ctx.Done() // ends when the test's cleanup closes the server
		return RetireResponse{}, ctx.Err()
	}), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	start := time.Now()
	_, err := Retire(ctx, s.Port(), testToken, RetireRequest{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
	require.NotContains(t, err.Error(), testToken)
}

func TestRetire_BadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		port  int
		token string
		want  string
	}{
		{"port zero", 0, testToken, "retire: bad port 0"},
		{"port too big", 65536, testToken, "retire: bad port 65536"},
		{"empty token", 1, "", "retire: empty token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Retire(t.Context(), tc.port, tc.token, RetireRequest{})
			require.EqualError(t, err, tc.want)
		})
	}
}

// TestServer_Loopback_Raw sends requests the Go client would never send, over
// the wire, to check what net/http answers before the handler runs, and
// that every answer, refusals included, ends its connection although each
// request asks for keep-alive.
func TestServer_Loopback_Raw(t *testing.T) {
	t.Parallel()
	r := &recordingRetirer{}
	s := newTestServer(t, r, nil)
	addr := "127.0.0.1:" + strconv.Itoa(s.Port())

	for _, tc := range []struct {
		name string
		raw  string
		want int
	}{
		// net/http would answer 200 itself unless DisableGeneralOptionsHandler.
		{"OPTIONS star", "OPTIONS * HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", 404},
		{"origin", "POST /retire HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: https://evil.example\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 0\r\n\r\n", 403},
		{"rebound host", "POST /retire HTTP/1.1\r\nHost: evil.example:" + strconv.Itoa(s.Port()) + "\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 0\r\n\r\n", 403},
		{"HTTP/1.0 without Host", "POST /retire HTTP/1.0\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 0\r\n\r\n", 403},
		// net/http lingers 500 ms before closing after a 431 (Close cuts its wait at 100 ms).
		{"huge header", "POST /retire HTTP/1.1\r\nHost: " + addr + "\r\nX-Pad: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431},
		{"no token", "POST /retire HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 0\r\n\r\n", 401},
		{"wrong token", "POST /retire HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n", 401},
		{"other path", "POST /x HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 0\r\n\r\n", 404},
		{"other method", "GET /retire HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", 405},
		{"retire", "POST /retire HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 0\r\n\r\n", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d net.Dialer
			conn, err := d.DialContext(t.Context(), "tcp", addr)
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
			_, err = io.WriteString(conn, tc.raw)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, tc.want, resp.StatusCode)
			for k := range resp.Header {
				require.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "CORS header %s sent", k)
			}
			_, _ = io.Copy(io.Discard, resp.Body) // 431's body ends with the connection, maybe in a reset
			require.True(t, resp.Close, "the answer says the connection ends")
			_, err = conn.Read(make([]byte, 1))
			// EOF, or a reset where the server left part of the request unread.
			require.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
				"the server closed the connection after its answer: %v", err)
		})
	}
	_, n := r.lastRequest()
	require.Equal(t, 1, n, "only the good request retires")
}

// A connection that sends nothing is closed within the unauthenticated
// deadline (a second), without an answer.
func TestServer_ClosesSilentConnections(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, &recordingRetirer{}, nil)
	var d net.Dialer
	conn, err := d.DialContext(t.Context(), "tcp", "127.0.0.1:"+strconv.Itoa(s.Port()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(readHeaderTimeout+5*time.Second)))
	n, err := conn.Read(make([]byte, 1))
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF, "closed by the server, not by the test's deadline")
}

func TestServer_Close_AnswersWaitingCallers(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	s := New(testToken, RetirerFunc(func(ctx context.Context, _ RetireRequest) (RetireResponse, error) {
		close(started)
		<-ctx.Done()
		return RetireResponse{}, ctx.Err()
	}), nil) // AnswerWithin 5 s: the caller would wait that long
	require.NoError(t, s.Start())

	answered := make(chan error, 1)
	go func() {
		_, err := Retire(t.Context(), s.Port(), testToken, RetireRequest{})
		answered <- err
	}()
	recv(t, started)

	start := time.Now()
	require.NoError(t, s.Close())
	err := recv(t, answered)
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 503, se.Code)
	require.True(t, strings.HasPrefix(se.Body, `{"error":"bridge closing`), se.Body)
	require.Less(t, time.Since(start), time.Second, "Close must not wait out AnswerWithin")
}

// A server that answers 200 with something other than a bridge's answer
// (a `{}` from whatever took a stale run file's port) is not a retire, nor
// a waiter's answer: both calls say the answer is not a bridge's.
func TestClient_RefusesAnswersOfAnotherShape(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{}`,
		`{"ok":true}`,
		`{"retired":"agent:x#aaaaaaaa"}`,
		`{"retired":"agent:x#aaaaaaaa","current":"agent:x#aaaaaaaa"}`,
		`{"retired":"someone","current":"someone else"}`,
		`{"wake":"yes"}`,
		`{"wake":true}`,
		`[]`,
		`null`,
		`not json`,
		``,
	} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			port := srv.Listener.Addr().(*net.TCPAddr).Port

			_, err := Retire(t.Context(), port, testToken, RetireRequest{})
			require.ErrorIs(t, err, ErrNotABridge)
			require.NotContains(t, err.Error(), testToken)

			_, err = WaitForWork(t.Context(), port, testToken, WaitRequest{})
			require.ErrorIs(t, err, ErrNotABridge)
		})
	}
	t.Run("a bridge's answers", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{`{"wake":false}`, `{"wake":false,"reason":"superseded"}`, `{"wake":true,"line":"bee: a-1"}`} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, body)
			}))
			_, err := WaitForWork(t.Context(), srv.Listener.Addr().(*net.TCPAddr).Port, testToken, WaitRequest{})
			srv.Close()
			require.NoError(t, err, body)
		}
	})
}
