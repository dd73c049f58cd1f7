package clearctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
)

// heldChecker denies every path under its prefix, held by holder, and
// records the requests it was asked.
type heldChecker struct {
	prefix string
	holder string

	mu   sync.Mutex
	reqs []CheckPathsRequest
}

func (c *heldChecker) CheckPaths(_ context.Context, req CheckPathsRequest) (CheckPathsAnswer, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	a := CheckPathsAnswer{Allow: true}
	for _, p := range req.Paths {
		if strings.HasPrefix(p, c.prefix) {
			a.Allow = false
			a.Conflicts = append(a.Conflicts, PathConflict{
				Path: p, Holder: c.holder, Pattern: "src/auth/**", Exclusive: true,
				Reason: "moving sessions to the store", Action: "a-12",
			})
		}
	}
	return a, nil
}

func (c *heldChecker) requests() []CheckPathsRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CheckPathsRequest(nil), c.reqs...)
}

func TestServer_CheckPathsRoute(t *testing.T) {
	t.Parallel()
	c := &heldChecker{prefix: "/r/src/auth/", holder: mintedID(7)}
	s := newTestServer(t, &recordingRetirer{}, &Options{PathChecker: c})
	port := strconv.Itoa(s.Port())
	noToken := func(req *http.Request) { req.Header.Del("Authorization") }
	setHeader := func(k, v string) func(*http.Request) {
		return func(req *http.Request) { req.Header.Set(k, v) }
	}
	setHost := func(h string) func(*http.Request) {
		return func(req *http.Request) { req.Host = h }
	}
	many := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = fmt.Sprintf("/r/f%d", i)
		}
		data, err := json.Marshal(CheckPathsRequest{Paths: ps})
		require.NoError(t, err)
		return string(data)
	}
	for _, tc := range []struct {
		name     string
		method   string
		target   string
		body     string
		change   func(*http.Request)
		wantCode int
		wantBody string // "" for 2xx/4xx with JSON: not checked unless 401/403
		asked    bool   // whether the PathChecker must have been asked
	}{
		{name: "allow", method: "POST", body: `{"paths":["/r/README.md"],"tool":"Write","cwd":"/r"}`,
			wantCode: 200, wantBody: `{"allow":true}` + "\n", asked: true},
		{name: "deny", method: "POST", body: `{"paths":["/r/src/auth/login.go"],"tool":"Edit"}`,
			wantCode: 200, asked: true,
			wantBody: `{"allow":false,"conflicts":[{"path":"/r/src/auth/login.go","holder":"agent:test#00000007","pattern":"src/auth/**","exclusive":true,"reason":"moving sessions to the store","action":"a-12"}]}` + "\n"},
		{name: "localhost", method: "POST", body: `{"paths":["/r/x"]}`, change: setHost("localhost:" + port), wantCode: 200, asked: true},
		{name: "unknown fields ignored", method: "POST", body: `{"paths":["/r/x"],"session_id":"s"}`, wantCode: 200, asked: true},
		{name: "most paths", method: "POST", body: many(MaxCheckPaths), wantCode: 200, asked: true},

		{name: "no token", method: "POST", body: `{"paths":["/r/x"]}`, change: noToken, wantCode: 401},
		{name: "wrong token", method: "POST", body: `{"paths":["/r/x"]}`, change: setHeader("Authorization", "Bearer nope"), wantCode: 401},
		{name: "origin", method: "POST", body: `{"paths":["/r/x"]}`, change: setHeader("Origin", "https://evil.example"), wantCode: 403},
		{name: "loopback origin", method: "POST", body: `{"paths":["/r/x"]}`, change: setHeader("Origin", "http://127.0.0.1:"+port), wantCode: 403},
		{name: "foreign host", method: "POST", body: `{"paths":["/r/x"]}`, change: setHost("evil.example:" + port), wantCode: 403},
		{name: "other port", method: "POST", body: `{"paths":["/r/x"]}`, change: setHost("127.0.0.1:1"), wantCode: 403},
		{name: "GET", method: "GET", wantCode: 405},
		{name: "PUT", method: "PUT", body: `{"paths":["/r/x"]}`, wantCode: 405},
		{name: "trailing slash", method: "POST", target: checkPathsPath + "/", body: `{"paths":["/r/x"]}`, wantCode: 404},
		{name: "unclean route", method: "POST", target: "/x/.." + checkPathsPath, body: `{"paths":["/r/x"]}`, wantCode: 404},

		{name: "big body", method: "POST", body: `{"paths":["/` + strings.Repeat("a", MaxBodyBytes) + `"]}`, wantCode: 413},
		{name: "token before body", method: "POST", body: `{`, change: noToken, wantCode: 401},
		{name: "bad JSON", method: "POST", body: `{"paths":`, wantCode: 400},
		{name: "empty body", method: "POST", body: ``, wantCode: 400},
		{name: "no paths", method: "POST", body: `{"paths":[]}`, wantCode: 400},
		{name: "too many paths", method: "POST", body: many(MaxCheckPaths + 1), wantCode: 400},
		{name: "relative path", method: "POST", body: `{"paths":["src/x.go"]}`, wantCode: 400},
		{name: "unclean path", method: "POST", body: `{"paths":["/r/src/../x.go"]}`, wantCode: 400},
		{name: "trailing slash path", method: "POST", body: `{"paths":["/r/src/"]}`, wantCode: 400},
		{name: "NUL in path", method: "POST", body: `{"paths":["/r/a\u0000b"]}`, wantCode: 400},
		{name: "long path", method: "POST", body: `{"paths":["/` + strings.Repeat("a", MaxPathBytes) + `"]}`, wantCode: 400},
		{name: "relative cwd", method: "POST", body: `{"paths":["/r/x"],"cwd":"r"}`, wantCode: 400},
		{name: "tool with a newline", method: "POST", body: `{"paths":["/r/x"],"tool":"Write\n"}`, wantCode: 400},
		{name: "long tool", method: "POST", body: `{"paths":["/r/x"],"tool":"` + strings.Repeat("W", MaxToolBytes+1) + `"}`, wantCode: 400},
		{name: "paths not a list", method: "POST", body: `{"paths":"/r/x"}`, wantCode: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = checkPathsPath
			}
			before := len(c.requests())
			req := newRequest(t, s, tc.method, target, tc.body)
			if tc.change != nil {
				tc.change(req)
			}
			rec := serve(s, req)
			require.Equal(t, tc.wantCode, rec.Code, "body: %s", rec.Body)
			requireNoCORS(t, rec.Header())
			switch {
			case tc.wantBody != "":
				require.Equal(t, tc.wantBody, rec.Body.String())
			case tc.wantCode == 401 || tc.wantCode == 403:
				require.Empty(t, rec.Body.String())
			case tc.wantCode == 400 || tc.wantCode == 413:
				require.Regexp(t, `^\{"error":".+"\}\n$`, rec.Body.String())
			case tc.wantCode == 405:
				require.Equal(t, "POST", rec.Header().Get("Allow"))
			}
			require.Equal(t, tc.asked, len(c.requests()) == before+1, "whether the checker was asked")
		})
	}
}

// The request reaches the PathChecker as it was sent.
func TestServer_CheckPaths_PassesTheRequest(t *testing.T) {
	t.Parallel()
	c := &heldChecker{prefix: "/nothing/"}
	s := newTestServer(t, &recordingRetirer{}, &Options{PathChecker: c})
	want := CheckPathsRequest{Paths: []string{"/r/a b/ü.go", "/r/\u202ex"}, Tool: "MultiEdit", Cwd: "/r"}
	a, err := CheckPaths(t.Context(), s.Port(), testToken, want)
	require.NoError(t, err)
	require.Equal(t, CheckPathsAnswer{Allow: true}, a)
	require.Equal(t, []CheckPathsRequest{want}, c.requests())
}

// A bridge without a PathChecker does not serve the route, as an older
// bridge does not: 404, which the client reports as a StatusError.
func TestServer_CheckPathsNeedsAChecker(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, &recordingRetirer{}, nil)
	rec := serve(s, newRequest(t, s, "POST", checkPathsPath, `{"paths":["/r/x"]}`))
	require.Equal(t, 404, rec.Code)

	_, err := CheckPaths(t.Context(), s.Port(), testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 404, se.Code)
	require.True(t, strings.HasPrefix(err.Error(), "check paths: bridge answered 404 Not Found"), err.Error())
	require.NotContains(t, err.Error(), testToken)
}

func TestServer_CheckPaths_CheckerFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		checker PathCheckerFunc
		want    string
	}{
		{"error", func(context.Context, CheckPathsRequest) (CheckPathsAnswer, error) {
			return CheckPathsAnswer{}, errors.New("board locked")
		}, `{"error":"board locked"}`},
		{"panic", func(context.Context, CheckPathsRequest) (CheckPathsAnswer, error) {
			panic("boom")
		}, `{"error":"check paths panicked: boom"}`},
		{"deny without a conflict", func(context.Context, CheckPathsRequest) (CheckPathsAnswer, error) {
			return CheckPathsAnswer{}, nil
		}, `{"error":"the bridge's path checker gave a bad answer: it refuses without naming a conflict"}`},
		{"allow with a conflict", func(context.Context, CheckPathsRequest) (CheckPathsAnswer, error) {
			return CheckPathsAnswer{Allow: true, Conflicts: []PathConflict{{Path: "/r/x", Holder: mintedID(1)}}}, nil
		}, `{"error":"the bridge's path checker gave a bad answer: it allows and names conflicts"}`},
		{"conflict without a holder", func(context.Context, CheckPathsRequest) (CheckPathsAnswer, error) {
			return CheckPathsAnswer{Conflicts: []PathConflict{{Path: "/r/x"}}}, nil
		}, `{"error":"the bridge's path checker gave a bad answer: conflicts[0] does not name its path and holder"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestServer(t, &recordingRetirer{}, &Options{PathChecker: tc.checker})
			rec := serve(s, newRequest(t, s, "POST", checkPathsPath, `{"paths":["/r/x"]}`))
			require.Equal(t, 500, rec.Code)
			require.JSONEq(t, tc.want, rec.Body.String())

			_, err := CheckPaths(t.Context(), s.Port(), testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
			se, ok := errors.AsType[*StatusError](err)
			require.True(t, ok, "got %v", err)
			require.Equal(t, 500, se.Code)
		})
	}
}

// An answer naming more than MaxConflicts conflicts is cut there, and the
// rest counted in More.
func TestServer_CheckPaths_CutsConflicts(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, &recordingRetirer{}, &Options{PathChecker: PathCheckerFunc(func(_ context.Context, req CheckPathsRequest) (CheckPathsAnswer, error) {
		a := CheckPathsAnswer{More: 3}
		for i := range MaxConflicts + 5 {
			a.Conflicts = append(a.Conflicts, PathConflict{Path: fmt.Sprintf("/r/f%d", i), Holder: mintedID(i)})
		}
		return a, nil
	})})
	a, err := CheckPaths(t.Context(), s.Port(), testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
	require.NoError(t, err)
	require.False(t, a.Allow)
	require.Len(t, a.Conflicts, MaxConflicts)
	require.Equal(t, 8, a.More)
	require.Equal(t, "/r/f0", a.Conflicts[0].Path)
}

// A PathChecker that has not decided within CheckWithin is answered 503
// then, to the fake-clock instant, whether it heeds its ctx or not; the
// one that heeds it sees its ctx end at that instant.
func TestServer_CheckPaths_Bound(t *testing.T) {
	t.Parallel()
	for _, heeds := range []bool{true, false} {
		t.Run(fmt.Sprintf("heeds ctx %v", heeds), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				ended := make(chan time.Duration, 1)
				start := time.Now()
				s, client := newBubbleServer(t, &recordingRetirer{}, &Options{PathChecker: PathCheckerFunc(func(ctx context.Context, _ CheckPathsRequest) (CheckPathsAnswer, error) {
					if heeds {
						<-ctx.Done()
						ended <- time.Since(start)
						return CheckPathsAnswer{}, ctx.Err()
					}
					<-release
					return CheckPathsAnswer{Allow: true}, nil
				})})
				defer close(release)
				_ = s

				var answer map[string]string
				code, err := client.post(t.Context(), checkPathsPath, CheckPathsRequest{Paths: []string{"/r/x"}}, &answer)
				require.NoError(t, err)
				require.Equal(t, 503, code)
				require.Equal(t, "the bridge did not decide within 500ms", answer["error"])
				require.Equal(t, DefaultCheckWithin, time.Since(start), "answered at the bound")
				if heeds {
					require.Equal(t, DefaultCheckWithin, recv(t, ended))
				}
			})
		})
	}
}

// Close answers a caller waiting on a check 503 at once, and waits for the
// PathChecker to return.
func TestServer_Close_AnswersWaitingChecks(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	var returned atomic.Bool
	s := New(testToken, &recordingRetirer{}, &Options{
		CheckWithin: time.Hour,
		PathChecker: PathCheckerFunc(func(ctx context.Context, _ CheckPathsRequest) (CheckPathsAnswer, error) {
			close(entered)
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			returned.Store(true)
			return CheckPathsAnswer{}, context.Cause(ctx)
		}),
	})
	require.NoError(t, s.Start())
	errc := make(chan error, 1)
	go func() {
		_, err := CheckPaths(context.Background(), s.Port(), testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
		errc <- err
	}()
	recv(t, entered)
	start := time.Now()
	require.NoError(t, s.Close())
	require.True(t, returned.Load(), "Close returned before the PathChecker did")
	err := recv(t, errc)
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, 503, se.Code)
	require.Less(t, time.Since(start), 2*time.Second)
}

// More paths than one request may carry go in several, and the answers
// are merged: denied when any denies, the conflicts of all, cut at
// MaxConflicts.
func TestCheckPaths_Batches(t *testing.T) {
	t.Parallel()
	c := &heldChecker{prefix: "/r/src/auth/", holder: mintedID(3)}
	s := newTestServer(t, &recordingRetirer{}, &Options{PathChecker: c})

	var paths []string
	for i := range 2500 {
		paths = append(paths, fmt.Sprintf("/r/pkg/f%04d.go", i))
	}
	// Long paths, so the body limit and not the count splits these.
	for i := range 40 {
		paths = append(paths, fmt.Sprintf("/r/long/%s/%d", strings.Repeat("d", 3000), i))
	}
	paths = append(paths, "/r/src/auth/a.go")
	// A deadline of its own: without one, all the requests must fit in
	// DefaultCheckClientTimeout, which a loaded machine may not give them.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, err := CheckPaths(ctx, s.Port(), testToken, CheckPathsRequest{Paths: paths, Tool: ToolGitCommit, Cwd: "/r"})
	require.NoError(t, err)
	require.Equal(t, CheckPathsAnswer{Allow: false, Conflicts: []PathConflict{{
		Path: "/r/src/auth/a.go", Holder: mintedID(3), Pattern: "src/auth/**", Exclusive: true,
		Reason: "moving sessions to the store", Action: "a-12",
	}}}, a)

	reqs := c.requests()
	require.Greater(t, len(reqs), 4, "2500 short paths need 3 requests, 40 of 3 KB need 2 more")
	var got []string
	for _, r := range reqs {
		require.LessOrEqual(t, len(r.Paths), MaxCheckPaths)
		require.Equal(t, ToolGitCommit, r.Tool)
		require.Equal(t, "/r", r.Cwd)
		data, err := json.Marshal(r)
		require.NoError(t, err)
		require.LessOrEqual(t, len(data), MaxBodyBytes)
		got = append(got, r.Paths...)
	}
	require.Equal(t, paths, got, "every path asked once, in order")

	// Conflicts from many requests are cut at MaxConflicts.
	var held []string
	for i := range 1500 {
		held = append(held, fmt.Sprintf("/r/src/auth/f%d", i))
	}
	a, err = CheckPaths(ctx, s.Port(), testToken, CheckPathsRequest{Paths: held})
	require.NoError(t, err)
	require.False(t, a.Allow)
	require.Len(t, a.Conflicts, MaxConflicts)
	require.Equal(t, 1500-MaxConflicts, a.More)
}

func TestCheckPaths_Errors(t *testing.T) {
	t.Parallel()
	s := New(testToken, &recordingRetirer{}, &Options{PathChecker: &heldChecker{}})
	require.NoError(t, s.Start())
	closedPort := s.Port()
	require.NoError(t, s.Close())

	ok := CheckPathsRequest{Paths: []string{"/r/x"}}
	for _, tc := range []struct {
		name  string
		port  int
		token string
		req   CheckPathsRequest
		is    error
		want  string
	}{
		{name: "not listening", port: closedPort, token: testToken, req: ok, is: ErrNotListening},
		{name: "port zero", port: 0, token: testToken, req: ok, want: "check paths: bad port 0"},
		{name: "empty token", port: 1, token: "", req: ok, want: "check paths: empty token"},
		{name: "no paths", port: 1, token: testToken, req: CheckPathsRequest{}, want: "check paths: paths is empty: name at least one file"},
		{name: "relative path", port: 1, token: testToken, req: CheckPathsRequest{Paths: []string{"x"}}, want: `check paths: paths[0]: "x" is not absolute`},
		{name: "relative path past the first batch", port: 1, token: testToken,
			req:  CheckPathsRequest{Paths: append(make([]string, 0, MaxCheckPaths+1), append(repeat("/r/x", MaxCheckPaths), "y")...)},
			want: fmt.Sprintf(`check paths: paths[%d]: "y" is not absolute`, MaxCheckPaths)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckPaths(t.Context(), tc.port, tc.token, tc.req)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			if tc.want != "" {
				require.EqualError(t, err, tc.want)
			}
			require.NotContains(t, err.Error(), testToken)
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A server that never answers: CheckPaths gives up at its ctx's deadline,
// or at DefaultCheckClientTimeout without one.
func TestCheckPaths_Hangs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var conns sync.WaitGroup
	defer conns.Wait()
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, unanswered, until the listener closes
		}
	})
	port := ln.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = CheckPaths(ctx, port, testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)

	start = time.Now()
	_, err = CheckPaths(t.Context(), port, testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), DefaultCheckClientTimeout)
	require.Less(t, time.Since(start), DefaultCheckClientTimeout+2*time.Second)
	require.NoError(t, ln.Close())
}

// A 200 that is not a bridge's answer to /check-paths is refused.
func TestCheckPaths_RefusesAnswersOfAnotherShape(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{}`,
		`{"allow":"yes"}`,
		`{"allow":false}`,
		`{"allow":false,"conflicts":[]}`,
		`{"allow":false,"conflicts":[{"path":"/r/x"}]}`,
		`{"allow":true,"conflicts":[{"path":"/r/x","holder":"agent:x#aaaaaaaa"}]}`,
		`{"allow":false,"conflicts":[{"path":"/r/x","holder":"agent:x#aaaaaaaa"}],"more":-1}`,
		`{"wake":false}`,
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
			_, err := CheckPaths(t.Context(), srv.Listener.Addr().(*net.TCPAddr).Port, testToken, CheckPathsRequest{Paths: []string{"/r/x"}})
			require.ErrorIs(t, err, ErrNotABridge)
			require.NotContains(t, err.Error(), testToken)
		})
	}
}

func TestCheckPathsRequest_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  CheckPathsRequest
		want string // "" valid
	}{
		{"one path", CheckPathsRequest{Paths: []string{"/r/x"}}, ""},
		{"root", CheckPathsRequest{Paths: []string{"/"}}, ""},
		{"control characters are a file's name", CheckPathsRequest{Paths: []string{"/r/a\nb\x1b"}}, ""},
		{"all fields", CheckPathsRequest{Paths: []string{"/r/x"}, Tool: "NotebookEdit", Cwd: "/r"}, ""},
		{"none", CheckPathsRequest{}, "paths is empty: name at least one file"},
		{"empty path", CheckPathsRequest{Paths: []string{""}}, `paths[0]: "" is not absolute`},
		{"dot dot", CheckPathsRequest{Paths: []string{"/r/x", "/r/../x"}}, `paths[1]: "/r/../x" is not clean ("/x")`},
		{"double slash", CheckPathsRequest{Paths: []string{"//r"}}, `paths[0]: "//r" is not clean ("/r")`},
		{"invalid UTF-8", CheckPathsRequest{Paths: []string{"/r/\xff"}}, "paths[0]: not valid UTF-8"},
		{"NUL", CheckPathsRequest{Paths: []string{"/r/\x00"}}, "paths[0]: holds a NUL byte"},
		{"long", CheckPathsRequest{Paths: []string{"/" + strings.Repeat("a", MaxPathBytes)}}, "paths[0]: 4097 bytes, more than 4096"},
		{"too many", CheckPathsRequest{Paths: repeat("/r/x", MaxCheckPaths+1)}, "paths holds 1001 paths, more than 1000"},
		{"relative cwd", CheckPathsRequest{Paths: []string{"/r/x"}, Cwd: "."}, `cwd: "." is not absolute`},
		{"tool", CheckPathsRequest{Paths: []string{"/r/x"}, Tool: "Wr\x7fite"}, `tool holds '\x7f' at byte 2: only printable ASCII is allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}
