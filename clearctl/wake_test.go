package clearctl

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// holdingWaker records each waiter and holds it until its ctx ends or the
// test answers it through reply.
type holdingWaker struct {
	mu     sync.Mutex
	reqs   []WaitRequest
	causes []error // context.Cause of each ended waiter, in the order they ended
	arrive chan WaitRequest
	reply  chan WaitResponse
}

func newHoldingWaker() *holdingWaker {
	return &holdingWaker{arrive: make(chan WaitRequest, 10), reply: make(chan WaitResponse)}
}

func (h *holdingWaker) WaitForWork(ctx context.Context, req WaitRequest) WaitResponse {
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	h.mu.Unlock()
	h.arrive <- req
	select {
	case resp := <-h.reply:
		return resp
	case <-ctx.Done():
		h.mu.Lock()
		h.causes = append(h.causes, context.Cause(ctx))
		h.mu.Unlock()
		return WaitResponse{Reason: "gone"}
	}
}

func (h *holdingWaker) endedCauses() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.causes...)
}

func TestServer_WaitRoute(t *testing.T) {
	t.Parallel()
	w := WakerFunc(func(_ context.Context, req WaitRequest) WaitResponse {
		return WaitResponse{Wake: true, Line: "bee: for pid " + strconv.Itoa(req.PID)}
	})
	s := newTestServer(t, &recordingRetirer{}, &Options{Waker: w})
	noToken := func(req *http.Request) { req.Header.Del("Authorization") }
	for _, tc := range []struct {
		name     string
		method   string
		body     string
		change   func(*http.Request)
		wantCode int
		wantBody string
	}{
		{name: "wake", method: "POST", body: `{"pid":77,"session_id":"s","hook_event_name":"Stop"}`,
			wantCode: 200, wantBody: `{"wake":true,"line":"bee: for pid 77"}` + "\n"},
		{name: "empty body", method: "POST", wantCode: 200, wantBody: `{"wake":true,"line":"bee: for pid 0"}` + "\n"},
		{name: "no token", method: "POST", change: noToken, wantCode: 401, wantBody: ""},
		{name: "wrong token", method: "POST", change: func(req *http.Request) { req.Header.Set("Authorization", "Bearer nope") },
			wantCode: 401, wantBody: ""},
		{name: "origin", method: "POST", change: func(req *http.Request) { req.Header.Set("Origin", "https://evil.example") },
			wantCode: 403, wantBody: ""},
		{name: "foreign host", method: "POST", change: func(req *http.Request) { req.Host = "evil.example:" + strconv.Itoa(s.Port()) },
			wantCode: 403, wantBody: ""},
		{name: "GET", method: "GET", wantCode: 405},
		{name: "bad JSON", method: "POST", body: `{"pid":`, wantCode: 400},
		{name: "wrong type", method: "POST", body: `{"pid":"7"}`, wantCode: 400},
		{name: "big body", method: "POST", body: `{"session_id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, wantCode: 413},
		{name: "token before body", method: "POST", body: `{`, change: noToken, wantCode: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, s, tc.method, waitPath, tc.body)
			if tc.change != nil {
				tc.change(req)
			}
			rec := serve(s, req)
			require.Equal(t, tc.wantCode, rec.Code, "body: %s", rec.Body)
			requireNoCORS(t, rec.Header())
			if tc.wantBody != "" || tc.wantCode == 401 || tc.wantCode == 403 {
				require.Equal(t, tc.wantBody, rec.Body.String())
			}
		})
	}
}

func TestServer_WaitRouteNeedsAWaker(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, &recordingRetirer{}, nil)
	rec := serve(s, newRequest(t, s, "POST", waitPath, ""))
	require.Equal(t, 404, rec.Code)
	_, err := WaitForWork(t.Context(), s.Port(), testToken, WaitRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 404, se.Code)
	require.True(t, strings.HasPrefix(err.Error(), "wait for work: bridge answered 404"), err.Error())
}

// A waiter outlives the server's read and write timeouts (5 s, and
// AnswerWithin + 5 s): the route lifts them once the caller has
// authenticated. On a bubble's fake clock it is held a day.
func TestWaitForWork_OutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHoldingWaker()
		_, c := newBubbleServer(t, &recordingRetirer{}, &Options{Waker: h})
		type answer struct {
			code int
			resp WaitResponse
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			var a answer
			a.code, a.err = c.post(t.Context(), waitPath, WaitRequest{PID: 9, HookEventName: "Stop", RearmSeconds: 60}, &a.resp)
			got <- a
		}()
		require.Equal(t, WaitRequest{PID: 9, HookEventName: "Stop", RearmSeconds: 60}, recv(t, h.arrive))
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		select {
		case a := <-got:
			t.Fatalf("the waiter ended early: %+v", a)
		default:
		}
		require.Empty(t, h.endedCauses(), "the waiter's context must not end on the server's timeouts")
		h.reply <- WaitResponse{Wake: true, Line: "bee: action a-1"}
		a := recv(t, got)
		require.NoError(t, a.err)
		require.Equal(t, 200, a.code)
		require.Equal(t, WaitResponse{Wake: true, Line: "bee: action a-1"}, a.resp)
	})
}

// A waiter that hangs up is noticed at once: its Waker's context ends.
func TestWaitForWork_HangUpEndsTheWaker(t *testing.T) {
	t.Parallel()
	h := newHoldingWaker()
	s := newTestServer(t, &recordingRetirer{}, &Options{Waker: h})
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := WaitForWork(ctx, s.Port(), testToken, WaitRequest{})
		got <- err
	}()
	recv(t, h.arrive)
	cancel()
	err := recv(t, got)
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return len(h.endedCauses()) == 1 }, testtime.Bound(5*time.Second), 5*time.Millisecond)
	require.ErrorIs(t, h.endedCauses()[0], context.Canceled)
}

// Close answers a pending waiter "shutting down" at once, whatever the
// Waker returns, and refuses no later waiter with anything else.
func TestServer_Close_AnswersWaiters(t *testing.T) {
	t.Parallel()
	h := newHoldingWaker()
	s := New(testToken, &recordingRetirer{}, &Options{Waker: h})
	require.NoError(t, s.Start())
	got := make(chan WaitResponse, 2)
	for range 2 {
		go func() {
			resp, err := WaitForWork(t.Context(), s.Port(), testToken, WaitRequest{})
			if err != nil {
				resp.Reason = err.Error()
			}
			got <- resp
		}()
		recv(t, h.arrive)
	}
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), testtime.Bound(time.Second), "Close must answer waiters at once")
	for range 2 {
		require.Equal(t, WaitResponse{Reason: ReasonShuttingDown}, recv(t, got))
	}
	causes := h.endedCauses()
	require.Len(t, causes, 2, "Close returns only after every Waker call has")
	for _, c := range causes {
		require.ErrorIs(t, c, ErrClosed)
	}
	// After Close nothing listens.
	_, err := WaitForWork(t.Context(), s.Port(), testToken, WaitRequest{})
	require.ErrorIs(t, err, ErrNotListening)
}

func TestServer_Wait_Panics(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, &recordingRetirer{}, &Options{Waker: WakerFunc(func(context.Context, WaitRequest) WaitResponse {
		panic("boom")
	})})
	resp, err := WaitForWork(t.Context(), s.Port(), testToken, WaitRequest{})
	require.NoError(t, err)
	require.Equal(t, WaitResponse{Reason: "bridge error"}, resp)
}

func TestWaitForWork_Errors(t *testing.T) {
	t.Parallel()
	_, err := WaitForWork(t.Context(), 0, testToken, WaitRequest{})
	require.ErrorContains(t, err, "bad port 0")
	_, err = WaitForWork(t.Context(), 80, "", WaitRequest{})
	require.ErrorContains(t, err, "empty token")

	h := newHoldingWaker()
	s := newTestServer(t, &recordingRetirer{}, &Options{Waker: h})
	_, err = WaitForWork(t.Context(), s.Port(), "wrong", WaitRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 401, se.Code)
	require.NotContains(t, err.Error(), testToken)

	// A long line is cut.
	go func() {
		recv(t, h.arrive)
		h.reply <- WaitResponse{Wake: true, Line: strings.Repeat("é", MaxLineBytes)}
	}()
	resp, err := WaitForWork(t.Context(), s.Port(), testToken, WaitRequest{})
	require.NoError(t, err)
	require.LessOrEqual(t, len(resp.Line), MaxLineBytes+len("…"))
	require.True(t, strings.HasSuffix(resp.Line, "é…"), "cut on a rune boundary: %q", resp.Line[len(resp.Line)-8:])
}

// A bridge killed while a waiter waits: the connection breaks, and the
// client says so with ErrConnectionLost.
func TestWaitForWork_ConnectionLost(t *testing.T) {
	t.Parallel()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 4096)) // the request arrives; then the "bridge" dies
		_ = c.Close()
	}()
	_, err = WaitForWork(t.Context(), ln.Addr().(*net.TCPAddr).Port, testToken, WaitRequest{})
	require.ErrorIs(t, err, ErrConnectionLost)
	require.NotContains(t, err.Error(), testToken)
}

func TestWaitRequest_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  WaitRequest
		want string // "" for valid
	}{
		{"empty", WaitRequest{}, ""},
		{"stop", WaitRequest{PID: 7, SessionID: "0f3c2a4e-1111-2222-3333-444455556666", HookEventName: "Stop", RearmSeconds: 86000}, ""},
		{"session start", WaitRequest{HookEventName: "SessionStart"}, ""},
		{"other event", WaitRequest{HookEventName: "PreToolUse"}, "hook_event_name"},
		{"negative pid", WaitRequest{PID: -1}, "pid"},
		{"negative rearm", WaitRequest{RearmSeconds: -1}, "rearm_seconds"},
		{"huge rearm", WaitRequest{RearmSeconds: MaxRearmSeconds + 1}, "rearm_seconds"},
		{"bad session", WaitRequest{SessionID: "a\nb"}, "session_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
	// The route refuses such a body with 400, and never calls the Waker.
	s := newTestServer(t, &recordingRetirer{}, &Options{Waker: WakerFunc(func(context.Context, WaitRequest) WaitResponse {
		t.Error("the Waker must not be called")
		return WaitResponse{}
	})})
	rec := serve(s, newRequest(t, s, "POST", waitPath, `{"hook_event_name":"PreToolUse"}`))
	require.Equal(t, 400, rec.Code)
	require.Contains(t, rec.Body.String(), "hook_event_name")
}
