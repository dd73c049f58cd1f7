package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/boardpage"
	"github.com/tractat-us/bee/internal/testtime"
)

// FuzzPostAndShow posts a title and a body as a person would and shows
// them every way bee shows board text: bee list, show, watch, agents,
// wait, cancel and readdress, as text and as --json, and the board page.
// Whatever goes in, no view shows a raw control, C1 or bidi/format
// character, --json reads back exactly what the board holds, and nothing
// panics. A refused post says why, inertly too.
//
//	go test -run '^$' -fuzz FuzzPostAndShow -fuzztime 2m ./cmd/bee/
func FuzzPostAndShow(f *testing.F) {
	for _, seed := range [][2]string{
		{"fix the flaky test", "it fails one run in ten"},
		{hostile, "first line\r" + overwrite + "\n\x07second\tline\n"},
		{"invoice\u202etxt.exe", "pay\u200bpal \u2066iso\u2069"},
		{"nul\x00", "body\x00"},
		{"c1 \u0085\u009b", "\u0085\u009b31m"},
		{"tag \U000E0041", "\U000E007F"},
		{"\xff\xfe", "\xc3"},
		{"  ", ""},
		{"日本語 🐝", "réparer ✓"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, title, body string) {
		path := filepath.Join(t.TempDir(), "board.db")
		b, err := board.Open(path, nil)
		require.NoError(t, err)
		defer b.Close()

		out, errText, code := fuzzBee(t, path, "", "post", "--json", "--", title, body)
		requireInert(t, errText)
		if code != exitOK {
			require.Equal(t, exitUsage, code, "a refused post is the command line's fault: %s", errText)
			return
		}
		requireInert(t, out)
		var posted actions.Record
		require.NoError(t, json.Unmarshal([]byte(out), &posted))
		require.Equal(t, strings.TrimSpace(title), posted.Title, "--json reads back what the board holds")
		if body == "-" {
			body = "" // read from stdin, which is empty
		}
		require.Equal(t, body, posted.Body)

		// A session whose id is the title holds it and finishes it with
		// the body as its result; a second action is cancelled with it as
		// the reason.
		who := identity.ID("agent:worker#0000000c")
		require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid(), SessionID: title}))
		p, err := b.Next(t.Context(), who, "", 5*time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		_, err = b.Finish(t.Context(), who, "a-1", body)
		require.NoError(t, err)
		_, err = b.Post(t.Context(), "user:tester", actions.Draft{To: "worker", Title: title, Body: body})
		require.NoError(t, err)

		for _, args := range [][]string{
			{"list", "--all"}, {"list", "--all", "--json"},
			{"show", "a-1"}, {"show", "a-1", "--json"}, {"show", "a-2"},
			{"agents"}, {"agents", "--json"},
			{"wait", "a-1"}, {"wait", "a-1", "--json"},
			{"readdress", "a-2", "--to", "reviewer"}, {"readdress", "a-2", "--anyone", "--json"},
			{"cancel", "a-2", "--reason", body},
		} {
			out, errText, code := fuzzBee(t, path, "", args...)
			requireInert(t, out)
			requireInert(t, errText)
			if code != exitOK {
				// Only a reason the board refuses (a NUL, too long) may fail.
				require.Equal(t, "cancel", args[0], "bee %q: %s", args, errText)
			}
		}
		for _, asJSON := range []bool{false, true} {
			args := []string{"--board", path, "watch", "--all"}
			if asJSON {
				args = append(args, "--json")
			}
			out := fuzzWatch(t, args, 2)
			requireInert(t, out)
			if asJSON {
				var rec actions.Record
				first, _, _ := strings.Cut(out, "\n")
				require.NoError(t, json.Unmarshal([]byte(first), &rec))
				require.Equal(t, posted.Title, rec.Title)
				require.Equal(t, body, rec.Result)
			}
		}
		requireInert(t, fuzzPage(t, b))
	})
}

// fuzzBee runs bee on the board at path and returns its stdout, its
// stderr (with the error as bee prints it) and its exit code.
func fuzzBee(t *testing.T, path, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(nil)}
	err := m.Run(t.Context(), append([]string{"--board", path}, args...))
	code := exitCode(err, &stderr)
	return stdout.String(), stderr.String(), code
}

// fuzzWatch runs bee with args (a watch) until it has printed lines
// lines, and returns them.
func fuzzWatch(t *testing.T, args []string, lines int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testtime.Bound(10*time.Second))
	defer cancel()
	w := &countingWriter{lines: lines, done: cancel}
	m := &Main{Stdin: strings.NewReader(""), Stdout: w, Stderr: io.Discard, Getenv: testEnv(nil)}
	err := m.Run(ctx, args)
	require.Equal(t, exitInterrupted, exitOf(err), "%v", err)
	require.NoError(t, t.Context().Err())
	out := w.String()
	require.GreaterOrEqual(t, strings.Count(out, "\n"), lines, "watch printed %q", out)
	return out
}

// A countingWriter keeps what is written and calls done once it holds
// lines lines.
type countingWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	lines int
	done  func()
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Count(w.b.String(), "\n") >= w.lines {
		w.done()
	}
	return len(p), nil
}

func (w *countingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// fuzzPage serves the board page of b, signs in and returns the page and
// its live fragment, as a browser gets them.
func fuzzPage(t *testing.T, b *board.Board) string {
	t.Helper()
	srv := boardpage.New(b, "user:tester", nil)
	require.NoError(t, srv.Start())
	defer func() { require.NoError(t, srv.Close()) }()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, Timeout: testtime.Bound(10 * time.Second)}
	defer client.CloseIdleConnections()
	get := func(u string) string {
		req, err := http.NewRequestWithContext(t.Context(), "GET", u, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		page, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
		return string(page)
	}
	page := get(srv.LoginURL())
	origin, _, _ := strings.Cut(srv.LoginURL(), "/login")
	return page + get(origin+"/fragment")
}
