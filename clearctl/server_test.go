package clearctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testio"
	"github.com/tractat-us/bee/internal/testtime"
)

const testToken = "3f9c0a7e5b1d4c2a8e6f0b9d7c5a3e1f-test-token"

// TestMain fails the run if any test leaves a goroutine behind.
func TestMain(m *testing.M) { testtime.VerifyTestMain(m) }

// newTestServer starts a Server with testToken and closes it when the test
// ends.
func newTestServer(t testing.TB, r Retirer, opts *Options) *Server {
	t.Helper()
	s := New(testToken, r, opts)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// newRequest returns a request the Server accepts unless the test changes
// it: Host 127.0.0.1:<port>, the right token, no Origin.
func newRequest(t *testing.T, s *Server, method, target, body string) *http.Request {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	req.Host = "127.0.0.1:" + strconv.Itoa(s.Port())
	req.Header.Set("Authorization", "Bearer "+testToken)
	return req
}

// serve runs req through the Server's whole handler.
func serve(s *Server, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec
}

func requireNoCORS(t *testing.T, h http.Header) {
	t.Helper()
	for k := range h {
		require.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "CORS header %s sent", k)
	}
}

// recv returns the next value from ch, failing the test after 5 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testtime.Bound(5 * time.Second)):
		t.Fatal("timed out waiting on a channel")
		panic("unreachable")
	}
}

func mintedID(n int) string { return fmt.Sprintf("agent:test#%08x", n) }

// recordingRetirer answers every retire with the same response and keeps
// the last request.
type recordingRetirer struct {
	mu   sync.Mutex
	last RetireRequest
	n    int
}

func (r *recordingRetirer) Retire(_ context.Context, req RetireRequest) (RetireResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.n = req, r.n+1
	return RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, nil
}

func (r *recordingRetirer) lastRequest() (RetireRequest, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.n
}

func TestNew(t *testing.T) {
	t.Parallel()
	r := &recordingRetirer{}
	require.PanicsWithValue(t, "clearctl: New with an empty token", func() { New("", r, nil) })
	require.PanicsWithValue(t, "clearctl: New with a nil Retirer", func() { New(testToken, nil, nil) })

	opts := &Options{AnswerWithin: 50 * time.Millisecond}
	s := New(testToken, r, opts)
	opts.AnswerWithin = time.Hour
	require.Equal(t, 50*time.Millisecond, s.answerWithin, "New must copy opts")
	require.Equal(t, DefaultAnswerWithin, New(testToken, r, nil).answerWithin)
	require.Equal(t, DefaultAnswerWithin, New(testToken, r, &Options{AnswerWithin: -1}).answerWithin)
}

func TestServer_Handler(t *testing.T) {
	t.Parallel()
	logs := &testio.Buffer{}
	// Registered before newTestServer's cleanup, so it runs after Close.
	t.Cleanup(func() {
		require.NotContains(t, logs.String(), testToken, "the token must never be logged")
	})
	r := &recordingRetirer{}
	s := newTestServer(t, r, &Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	port := strconv.Itoa(s.Port())
	okBody := `{"retired":"agent:test#00000001","current":"agent:test#00000002"}` + "\n"

	setHeader := func(k, v string) func(*http.Request) {
		return func(req *http.Request) { req.Header.Set(k, v) }
	}
	setHost := func(h string) func(*http.Request) {
		return func(req *http.Request) { req.Host = h }
	}
	noToken := func(req *http.Request) { req.Header.Del("Authorization") }
	both := func(a, b func(*http.Request)) func(*http.Request) {
		return func(req *http.Request) { a(req); b(req) }
	}

	for _, tc := range []struct {
		name     string
		method   string
		target   string
		body     string
		change   func(*http.Request)
		wantCode int
		wantBody *string        // nil: not checked
		wantReq  *RetireRequest // checked on 200
	}{
		{name: "retire", method: "POST", target: "/retire",
			body:     `{"session_id":"s-1","transcript_path":"/t/s-1.jsonl"}`,
			wantCode: 200, wantBody: &okBody, wantReq: &RetireRequest{SessionID: "s-1", TranscriptPath: "/t/s-1.jsonl"}},
		{name: "host localhost", method: "POST", target: "/retire", body: `{"session_id":"s-2"}`,
			change: setHost("localhost:" + port), wantCode: 200, wantReq: &RetireRequest{SessionID: "s-2"}},
		{name: "empty body", method: "POST", target: "/retire", body: "",
			wantCode: 200, wantBody: &okBody, wantReq: &RetireRequest{}},
		{name: "blank body", method: "POST", target: "/retire", body: " \n",
			wantCode: 200, wantReq: &RetireRequest{}},
		{name: "unknown fields ignored", method: "POST", target: "/retire", body: `{"session_id":"s-3","cwd":"/x"}`,
			wantCode: 200, wantReq: &RetireRequest{SessionID: "s-3"}},
		{name: "lowercase scheme", method: "POST", target: "/retire",
			change: setHeader("Authorization", "bearer "+testToken), wantCode: 200, wantReq: &RetireRequest{}},

		{name: "missing token", method: "POST", target: "/retire", change: noToken, wantCode: 401, wantBody: ptr("")},
		{name: "wrong token", method: "POST", target: "/retire",
			change: setHeader("Authorization", "Bearer "+testToken[:len(testToken)-1]+"x"), wantCode: 401, wantBody: ptr("")},
		{name: "token prefix", method: "POST", target: "/retire",
			change: setHeader("Authorization", "Bearer "+testToken[:8]), wantCode: 401, wantBody: ptr("")},
		{name: "basic scheme", method: "POST", target: "/retire",
			change: setHeader("Authorization", "Basic "+testToken), wantCode: 401, wantBody: ptr("")},
		{name: "bare token", method: "POST", target: "/retire",
			change: setHeader("Authorization", testToken), wantCode: 401, wantBody: ptr("")},
		{name: "two authorization headers", method: "POST", target: "/retire",
			change: func(req *http.Request) { req.Header.Add("Authorization", "Bearer wrong") }, wantCode: 401, wantBody: ptr("")},

		{name: "origin", method: "POST", target: "/retire",
			change: setHeader("Origin", "https://evil.example"), wantCode: 403, wantBody: ptr("")},
		{name: "empty origin", method: "POST", target: "/retire",
			change: setHeader("Origin", ""), wantCode: 403},
		{name: "loopback origin", method: "POST", target: "/retire",
			change: setHeader("Origin", "http://127.0.0.1:"+port), wantCode: 403},
		{name: "origin before token", method: "POST", target: "/retire",
			change: both(noToken, setHeader("Origin", "https://evil.example")), wantCode: 403},
		{name: "foreign host", method: "POST", target: "/retire",
			change: setHost("evil.example:" + port), wantCode: 403, wantBody: ptr("")},
		{name: "other port", method: "POST", target: "/retire",
			change: setHost("127.0.0.1:1"), wantCode: 403},
		{name: "host without port", method: "POST", target: "/retire",
			change: setHost("127.0.0.1"), wantCode: 403},
		{name: "ipv6 loopback host", method: "POST", target: "/retire",
			change: setHost("[::1]:" + port), wantCode: 403},
		{name: "uppercase host", method: "POST", target: "/retire",
			change: setHost("LOCALHOST:" + port), wantCode: 403},
		{name: "host before token", method: "POST", target: "/retire",
			change: both(noToken, setHost("evil.example")), wantCode: 403},
		{name: "preflight", method: "OPTIONS", target: "/retire",
			change: both(setHeader("Origin", "https://evil.example"), setHeader("Access-Control-Request-Method", "POST")), wantCode: 403},

		{name: "other path", method: "POST", target: "/other", wantCode: 404},
		{name: "root", method: "GET", target: "/", wantCode: 404},
		{name: "trailing slash", method: "POST", target: "/retire/", wantCode: 404},
		{name: "unclean path not redirected", method: "POST", target: "/x/../retire", wantCode: 404},
		{name: "double slash not redirected", method: "POST", target: "//retire", wantCode: 404},
		{name: "GET", method: "GET", target: "/retire", wantCode: 405},
		{name: "HEAD", method: "HEAD", target: "/retire", wantCode: 405},
		{name: "OPTIONS", method: "OPTIONS", target: "/retire", wantCode: 405},
		{name: "PUT without token", method: "PUT", target: "/retire", change: noToken, wantCode: 405},

		{name: "big body", method: "POST", target: "/retire",
			body: `{"session_id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, wantCode: 413},
		{name: "big bad body", method: "POST", target: "/retire",
			body: "x" + strings.Repeat(" ", MaxBodyBytes), wantCode: 413},
		{name: "bad JSON", method: "POST", target: "/retire", body: `{"session_id":`, wantCode: 400},
		{name: "JSON array", method: "POST", target: "/retire", body: `[]`, wantCode: 400},
		{name: "wrong field type", method: "POST", target: "/retire", body: `{"session_id":7}`, wantCode: 400},
		{name: "trailing data", method: "POST", target: "/retire", body: `{} {}`, wantCode: 400},
		{name: "token before body", method: "POST", target: "/retire", body: `{`, change: noToken, wantCode: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, s, tc.method, tc.target, tc.body)
			if tc.change != nil {
				tc.change(req)
			}
			_, before := r.lastRequest()
			rec := serve(s, req)

			require.Equal(t, tc.wantCode, rec.Code, "body: %s", rec.Body)
			requireNoCORS(t, rec.Header())
			if tc.wantBody != nil {
				require.Equal(t, *tc.wantBody, rec.Body.String())
			}
			got, after := r.lastRequest()
			switch rec.Code {
			case 200:
				require.Equal(t, before+1, after)
				require.Equal(t, *tc.wantReq, got)
				require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			case 401:
				require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
				fallthrough
			default:
				require.Equal(t, before, after, "a refused request must not retire")
			}
			switch rec.Code {
			case 400, 413:
				require.Regexp(t, `^\{"error":".+"\}\n$`, rec.Body.String())
			case 405:
				require.Equal(t, "POST", rec.Header().Get("Allow"))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestServer_Retire_Fails(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
		return RetireResponse{}, errors.New("depart agent:test#00000001: board locked")
	}), nil)
	rec := serve(s, newRequest(t, s, "POST", "/retire", ""))
	require.Equal(t, 500, rec.Code)
	require.JSONEq(t, `{"error":"depart agent:test#00000001: board locked"}`, rec.Body.String())
	requireNoCORS(t, rec.Header())
}

func TestServer_Retire_Panics(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	s := newTestServer(t, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, nil
	}), nil)
	rec := serve(s, newRequest(t, s, "POST", "/retire", ""))
	require.Equal(t, 500, rec.Code)
	require.JSONEq(t, `{"error":"retire panicked: boom"}`, rec.Body.String())

	rec = serve(s, newRequest(t, s, "POST", "/retire", ""))
	require.Equal(t, 200, rec.Code, "a panicked retire must give its turn back")
}

// A retire still running when AnswerWithin has passed is answered 202 then,
// to the fake-clock instant, and completes afterwards.
func TestServer_Retire_Slow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		completed := make(chan RetireResponse, 1)
		s, _ := newBubbleServer(t, RetirerFunc(func(context.Context, RetireRequest) (RetireResponse, error) {
			<-release
			resp := RetireResponse{Retired: mintedID(1), Current: mintedID(2)}
			completed <- resp
			return resp, nil
		}), nil)

		start := time.Now()
		rec := serve(s, newRequest(t, s, "POST", "/retire", ""))
		require.Equal(t, 202, rec.Code)
		require.JSONEq(t, `{"status":"running"}`, rec.Body.String())
		require.Equal(t, DefaultAnswerWithin, time.Since(start), "the answer does not wait for the retire")
		select {
		case <-completed:
			t.Fatal("the retire completed before it was released")
		default:
		}

		close(release)
		require.Equal(t, RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, recv(t, completed),
			"the retire must complete after the 202")
	})
}

// mintingRetirer retires one identity per call, counting up.
type mintingRetirer struct {
	// n is deliberately unguarded: the Server must serialize calls, and the
	// race detector fails the test if it does not.
	n        int
	active   atomic.Int32
	overlaps atomic.Int32
}

func (m *mintingRetirer) Retire(context.Context, RetireRequest) (RetireResponse, error) {
	if m.active.Add(1) > 1 {
		m.overlaps.Add(1)
	}
	defer m.active.Add(-1)
	// Inside a synctest bubble this blocks until every other goroutine
	// has run as far as it can: unserialized calls would overlap here.
	time.Sleep(time.Millisecond)
	old := m.n
	m.n++
	return RetireResponse{Retired: mintedID(old), Current: mintedID(old + 1)}, nil
}

// Retires run one at a time. In a bubble, each retire's sleep blocks it
// durably, so every other goroutine runs meanwhile: unserialized calls
// would overlap every time.
func TestServer_Retire_Serialized(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const callers = 8
		m := &mintingRetirer{}
		s, _ := newBubbleServer(t, m, nil)

		recs := make([]*httptest.ResponseRecorder, callers)
		var wg sync.WaitGroup
		for i := range callers {
			req := newRequest(t, s, "POST", "/retire", "")
			wg.Go(func() { recs[i] = serve(s, req) })
		}
		wg.Wait()

		require.Zero(t, m.overlaps.Load(), "two retires ran at once")
		retired := map[string]bool{}
		for _, rec := range recs {
			require.Equal(t, 200, rec.Code)
			var resp RetireResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
			require.False(t, retired[resp.Retired], "%s retired twice", resp.Retired)
			retired[resp.Retired] = true
		}
		for i := range callers {
			require.True(t, retired[mintedID(i)], "%s never retired", mintedID(i))
		}
	})
}

func TestServer_Retire_RunsOnLifetimeContext(t *testing.T) {
	t.Parallel()
	started := make(chan context.Context, 1)
	returned := make(chan struct{})
	s := New(testToken, RetirerFunc(func(ctx context.Context, _ RetireRequest) (RetireResponse, error) {
		defer close(returned)
		started <- ctx
		<-ctx.Done()
		return RetireResponse{}, ctx.Err()
	}), nil)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	reqCtx, cancelReq := context.WithCancel(t.Context())
	req := newRequest(t, s, "POST", "/retire", "").WithContext(reqCtx)
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() { answered <- serve(s, req) }()

	retireCtx := recv(t, started)
	cancelReq()
	rec := recv(t, answered)
	require.Equal(t, 202, rec.Code, "a caller that hung up is told the retire is running")
	require.NoError(t, retireCtx.Err(), "ending the request must not cancel the retire")
	select {
	case <-returned:
		t.Fatal("the retire returned while the server lived")
	default:
	}

	require.NoError(t, s.Close())
	select {
	case <-returned: // Close waited for it
	default:
		t.Fatal("Close returned before the retire did")
	}
	require.ErrorIs(t, retireCtx.Err(), context.Canceled)
	require.ErrorIs(t, context.Cause(retireCtx), ErrClosed)
}

func TestServer_Close_AbandonsQueuedRetires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		started := make(chan struct{}, 1)
		s, _ := newBubbleServer(t, RetirerFunc(func(ctx context.Context, _ RetireRequest) (RetireResponse, error) {
			calls.Add(1)
			started <- struct{}{}
			<-ctx.Done()
			return RetireResponse{}, ctx.Err()
		}), nil)

		// The first retire holds the turn; the second is queued behind it.
		require.Equal(t, 202, serve(s, newRequest(t, s, "POST", "/retire", "")).Code)
		recv(t, started)
		require.Equal(t, 202, serve(s, newRequest(t, s, "POST", "/retire", "")).Code)

		require.NoError(t, s.Close())
		require.Equal(t, int32(1), calls.Load(), "a retire queued at Close must never start")

		rec := serve(s, newRequest(t, s, "POST", "/retire", ""))
		require.Equal(t, 503, rec.Code, "after Close")
		require.JSONEq(t, `{"error":"bridge closing"}`, rec.Body.String())
	})
}

func TestServer_Start(t *testing.T) {
	t.Parallel()
	s := New(testToken, &recordingRetirer{}, nil)
	require.Zero(t, s.Port(), "before Start")
	rec := serve(s, newRequest(t, s, "POST", "/retire", ""))
	require.Equal(t, 403, rec.Code, "before Start every Host is refused")

	require.NoError(t, s.Start())
	port := s.Port()
	require.Positive(t, port)
	require.ErrorIs(t, s.Start(), ErrStarted)
	require.Equal(t, port, s.Port())

	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Start(), ErrClosed)
	require.Equal(t, port, s.Port(), "Port keeps the port after Close")
}

func TestServer_Close(t *testing.T) {
	t.Run("without Start", func(t *testing.T) {
		s := New(testToken, &recordingRetirer{}, nil)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Start(), ErrClosed)
		testtime.VerifyNoLeaks(t)
	})
	t.Run("after serving", func(t *testing.T) {
		s := New(testToken, &recordingRetirer{}, nil)
		require.NoError(t, s.Start())
		_, err := Retire(t.Context(), s.Port(), testToken, RetireRequest{})
		require.NoError(t, err)

		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { require.NoError(t, s.Close()) })
		}
		wg.Wait()
		require.NoError(t, s.Close())
		testtime.VerifyNoLeaks(t)
	})
}
