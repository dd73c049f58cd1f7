package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

func TestServe_Usage(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	_, _, err := run(t, path, "", "serve", "--port", "70000")
	requireUsage(t, err, "not a port")
	_, _, err = run(t, path, "", "serve", "extra")
	requireUsage(t, err, `unexpected argument "extra"`)
	out := bee(t, path, "serve", "--help")
	require.Contains(t, out, "bee serve [--port N] [--from NAME]")
	_, _, err = run(t, path, "", "serve", "--from", "two words")
	requireUsage(t, err, "cannot serve as --from")
	require.Contains(t, bee(t, path, "--help"), "serve ")
}

// bee serve prints the sign-in link alone on stdout, serves the board
// there, and ends cleanly when interrupted.
func TestServe_RunsUntilInterrupted(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "seen from the page")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	outR, outW := io.Pipe()
	stderr := &serveStderr{}
	m := &Main{
		Stdin:  strings.NewReader(""),
		Stdout: outW,
		Stderr: stderr,
		Getenv: func(k string) string {
			if k == "USER" {
				return "tester"
			}
			return ""
		},
	}
	done := make(chan error, 1)
	go func() {
		err := m.Run(ctx, []string{"--board", path, "serve"})
		outW.Close()
		done <- err
	}()
	sc := bufio.NewScanner(outR)
	require.True(t, sc.Scan(), "a line on stdout")
	link := sc.Text()
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/login\?token=[A-Za-z0-9_-]{43}$`, link)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	page, _, _ := strings.Cut(link, "/login")
	req, err := http.NewRequestWithContext(t.Context(), "GET", page+"/", nil)
	require.NoError(t, err)
	req.AddCookie(resp.Cookies()[0])
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), "seen from the page")
	require.Contains(t, string(body), "user:tester")

	cancel()
	require.False(t, sc.Scan(), "nothing more on stdout")
	select {
	case err := <-done:
		require.Equal(t, exitInterrupted, exitOf(err), "bee serve ends as interrupted: %v", err)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("bee serve did not end within 10 s of the interrupt")
	}
	require.Contains(t, stderr.String(), "Open this link once to sign in")
}

// serveStderr is bee serve's stderr, written by its log and read by the
// test.
type serveStderr struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *serveStderr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *serveStderr) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
