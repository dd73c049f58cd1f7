package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/internal/version"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRunAs) {
	case "bee":
		main()
	case "poster":
		os.Exit(posterRole())
	}
	pgtest.Main(m) // stops the PostgreSQL cluster a test may have started
}

// run runs bee in-process against the board at path and returns its
// stdout, its stderr and its error.
func run(t *testing.T, path string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := &Main{
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string {
			if k == "USER" {
				return "tester"
			}
			return ""
		},
	}
	err := m.Run(t.Context(), append([]string{"--board", path}, args...))
	return stdout.String(), stderr.String(), err
}

// bee runs bee and requires success.
func bee(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, path, "", args...)
	require.NoError(t, err, "bee %v; stderr: %s", args, errOut)
	return out
}

func boardPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "board.db")
}

func TestMain_PostListShow(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	out := bee(t, path, "post", "fix the flaky test", "it fails one run in ten")
	require.Equal(t, "posted a-1 for anyone: fix the flaky test\n", out)
	out = bee(t, path, "post", "--to", "worker", "--from", "alice", "deploy")
	require.Equal(t, "posted a-2 for worker: deploy\n", out)

	out = bee(t, path, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+STATE\s+FOR\s+FROM\s+HOLDER\s+AGE\s+TITLE$`, lines[0])
	require.Regexp(t, `^a-1\s+open\s+anyone\s+user:tester\s+-\s+\d+s\s+fix the flaky test$`, lines[1])
	require.Regexp(t, `^a-2\s+open\s+worker\s+user:alice\s+-\s+\d+s\s+deploy$`, lines[2])

	var recs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "list", "--json")), &recs))
	require.Len(t, recs, 2)
	require.Equal(t, "a-1", recs[0].ID)
	require.Equal(t, "it fails one run in ten", recs[0].Body)
	require.Equal(t, actions.Open, recs[0].State)

	out = bee(t, path, "show", "a-1")
	require.Regexp(t, `title:\s+fix the flaky test`, out)
	require.Regexp(t, `state:\s+open\n`, out)
	require.Regexp(t, `from:\s+user:tester`, out)
	require.Contains(t, out, "\nbody:\nit fails one run in ten\n")

	var rec actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "show", "--json", "a-2")), &rec))
	require.Equal(t, "worker", rec.To)
	require.Equal(t, "user:alice", rec.From)

	// --board after the command works too.
	out, _, err := run(t, filepath.Join(t.TempDir(), "other.db"), "", "list", "--board", path, "--json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &recs))
	require.Len(t, recs, 2)
}

func TestMain_ListFilters(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "one")
	bee(t, path, "post", "two")
	bee(t, path, "post", "three")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	who := identity.ID("agent:w#12345678")
	p, err := b.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)
	_, err = b.Finish(t.Context(), who, p.Records[0].ID, "ok")
	require.NoError(t, err)
	_, err = b.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)

	ids := func(args ...string) []string {
		var recs []actions.Record
		require.NoError(t, json.Unmarshal([]byte(bee(t, path, append(args, "--json")...)), &recs))
		var out []string
		for _, r := range recs {
			out = append(out, r.ID+":"+string(r.State))
		}
		return out
	}
	require.Equal(t, []string{"a-2:claimed", "a-3:open"}, ids("list"))
	require.Equal(t, []string{"a-1:done", "a-2:claimed", "a-3:open"}, ids("list", "--all"))
	require.Equal(t, []string{"a-1:done"}, ids("list", "--state", "done"))
	require.Equal(t, []string{"a-2:claimed"}, ids("list", "--state", "claimed"))

	out := bee(t, path, "show", "a-1")
	require.Regexp(t, `state:\s+done by agent:w#12345678`, out)
	require.Contains(t, out, "\nresult:\nok\n")

	_, _, err = run(t, path, "", "list", "--state", "lost")
	requireUsage(t, err, "unknown state")
}

func TestMain_PostBodyFromStdin(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	out, _, err := run(t, path, "line one\nline two\n", "post", "--json", "piped", "-")
	require.NoError(t, err)
	var rec actions.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, "line one\nline two\n", rec.Body)
}

func TestMain_PostRefusals(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	_, _, err := run(t, path, "", "post")
	requireUsage(t, err, "no title")
	_, _, err = run(t, path, "", "post", "   ")
	requireUsage(t, err, "the title is blank")
	_, _, err = run(t, path, "", "post", "--from", "a b", "t")
	requireUsage(t, err, "cannot post as --from")
	_, _, err = run(t, path, "", "post", "t", "b", "extra")
	requireUsage(t, err, "quote the title")
	_, _, err = run(t, path, "", "post", "--bogus", "t")
	requireUsage(t, err, "flag provided but not defined")
	require.Equal(t, "no open, blocked or claimed actions (bee list --all shows ended ones too) on "+path+"\n", bee(t, path, "list"))
}

// Refusals say what is wrong in a person's words: no sentinel names
// ("...: too long") and no chains of causes.
func TestMain_PostRefusalMessages(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	for _, tc := range []struct {
		args []string
		want string
		is   error
	}{
		{[]string{strings.Repeat("x", 300)}, "bee post: title is 300 characters, more than 200 (put the detail in the body)", actions.ErrTooLong},
		{[]string{"two\nlines"}, "bee post: title must be one line (put the rest in the body)", actions.ErrBadText},
		{[]string{"t", "\xff"}, "bee post: body is not valid UTF-8", actions.ErrBadText},
		{[]string{"bell\a"}, "bee post: title holds the control character U+0007; a title is plain text", actions.ErrBadText},
		{[]string{"nul\x00title"}, "bee post: title holds the control character U+0000; a title is plain text", actions.ErrBadText},
		{[]string{"next line\u0085x"}, "bee post: title holds the control character U+0085; a title is plain text", actions.ErrBadText},
		{[]string{"t", "nul\x00body"}, "bee post: body holds a NUL character", actions.ErrBadText},
		{[]string{"--to", "two words", "t"}, `bee post: --to "two words" is not an agent name, which holds letters, digits, '.', '_' and '-' only, and starts with a letter or digit`, nil},
		{[]string{"--to", "agent:x#12", "t"}, `bee post: --to "agent:x#12" is not an identity, which looks like agent:<name>#<8 lowercase hex digits> (bee agents lists them); to reach whichever session of an agent is free, give the agent's name alone`, nil},
		{[]string{"--to", "user:b b", "t"}, `bee post: --to "user:b b" is not a person, whose name after user: holds letters, digits, '.', '_' and '-' only, and starts with a letter or digit`, nil},
		{[]string{"--from", "a b", "t"}, `bee post: cannot post as --from "a b": a person's name holds letters, digits, '.', '_' and '-' only, and starts with a letter or digit`, nil},
	} {
		p := path
		if tc.is == nil {
			p = filepath.Join(t.TempDir(), "untouched.db")
		}
		_, _, err := run(t, p, "", append([]string{"post"}, tc.args...)...)
		requireUsage(t, err, tc.want)
		require.EqualError(t, err, tc.want)
		if tc.is != nil {
			require.ErrorIs(t, err, tc.is)
		} else {
			require.NoFileExists(t, p, "a refused --to or --from opens no board")
		}
	}
}

// newBoard creates an empty board file and returns its path.
func newBoard(t *testing.T) string {
	t.Helper()
	path := boardPath(t)
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	return path
}

// Reading a board that is not there is an error naming the path, never an
// empty board; posting creates it.
func TestMain_MissingBoard(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	for _, args := range [][]string{{"list"}, {"show", "a-1"}, {"agents"}} {
		_, _, err := run(t, path, "", args...)
		require.ErrorContains(t, err, "no board at "+path+": nothing has been posted there yet", "%v", args)
		require.Equal(t, exitNo, exitOf(err))
		require.NoFileExists(t, path, "%v must not create the board", args)
	}
	bee(t, path, "post", "first")
	require.FileExists(t, path)
	require.Contains(t, bee(t, path, "list"), "first")
}

// A command that creates the board says so, once: a mistyped --board
// shows up at once instead of passing for an empty board.
func TestMain_CreatedBoardIsAnnounced(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "typo.db")
	_, stderr, err := run(t, path, "", "post", "first")
	require.NoError(t, err)
	require.Equal(t, "created a new board at "+path+"\n", stderr)
	_, stderr, err = run(t, path, "", "post", "second")
	require.NoError(t, err)
	require.Empty(t, stderr, "the board was there")

	// watch creates a missing board too, and says so before it watches.
	path = filepath.Join(t.TempDir(), "board.db")
	stderrLines := newLineReader()
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderrLines, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx, []string{"--board", path, "watch"}) })
	require.Equal(t, "created a new board at "+path, stderrLines.next(t, 10*time.Second))
	require.Contains(t, stderrLines.next(t, 10*time.Second), "watching "+path)
	cancel()
	wg.Wait()
	stderrLines.close()
}

func TestMain_ShowUnknown(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	_, _, err := run(t, path, "", "show", "a-42")
	require.ErrorIs(t, err, actions.ErrUnknownAction)
	var buf bytes.Buffer
	require.Equal(t, 1, exitCode(err, &buf))
	require.Equal(t, `Error: bee show: no action "a-42" on the board at `+path+"\nTry: bee list --all shows every action's id\n", buf.String())

	// A bare number is taken for the id people see as a-7, and an id in
	// capitals for the same in lower case.
	for id, hint := range map[string]string{"7": "action ids look like a-7: bee show a-7", "A-1": "action ids are lower case: bee show a-1"} {
		_, _, err = run(t, path, "", "show", id)
		require.ErrorIs(t, err, actions.ErrUnknownAction)
		buf.Reset()
		require.Equal(t, 1, exitCode(err, &buf))
		require.Equal(t, `Error: bee show: no action "`+id+`" on the board at `+path+"\nTry: "+hint+"\n", buf.String())
	}
	_, _, err = run(t, path, "", "show")
	requireUsage(t, err, "want one action id")
}

func TestMain_Agents(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	require.Equal(t, "no live agents on "+path+"\n", bee(t, path, "agents"))

	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	who := identity.ID("agent:worker#0491068b")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid(), ClaudePID: 4241, SessionID: "sess-1", Client: "gemini"}))
	bee(t, path, "post", "job")
	_, err = b.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)

	out := bee(t, path, "agents")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Regexp(t, `^IDENTITY\s+CLIENT\s+PID\s+CLAUDE PID\s+SESSION\s+JOINED\s+LEASE\s+WAITER\s+HOLDING$`, lines[0])
	require.Regexp(t, `^agent:worker#0491068b\s+Gemini CLI\s+`+strconv.Itoa(os.Getpid())+`\s+4241\s+sess-1\s+\d+s ago\s+\d+s left\s+-\s+a-1$`, lines[1])

	// An armed waiter shows, in the table and in --json.
	require.NoError(t, b.SetWaiter(t.Context(), who, true))
	lines = strings.Split(strings.TrimSpace(bee(t, path, "agents")), "\n")
	require.Regexp(t, `\s+armed \d+s\s+a-1$`, lines[1])
	var armed []actions.MemberInfo
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "agents", "--json")), &armed))
	require.NotNil(t, armed[0].WaiterSince)
	require.NoError(t, b.SetWaiter(t.Context(), who, false))

	var members []actions.MemberInfo
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "agents", "--json")), &members))
	require.Len(t, members, 1)
	require.Equal(t, who, members[0].ID)
	require.Equal(t, []string{"a-1"}, members[0].Holding)

	require.NoError(t, b.Depart(t.Context(), who))
	require.Equal(t, "no live agents on "+path+"\n", bee(t, path, "agents"))
}

func TestMain_UsageErrors(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	_, _, err := run(t, path, "", "frobnicate")
	requireUsage(t, err, `unknown command "frobnicate"`)
	var buf bytes.Buffer
	require.Equal(t, 2, exitCode(err, &buf))
	require.Equal(t, "Error: unknown command \"frobnicate\"\nTry: bee --help\n", buf.String())

	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	err = m.Run(t.Context(), nil)
	requireUsage(t, err, "no command given")

	require.Equal(t, 0, exitCode(nil, &buf))
}

func TestMain_Help(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	out := bee(t, path, "--help")
	require.Contains(t, out, "Commands:")
	for _, cmd := range []string{"post", "list", "show", "watch", "agents"} {
		out := bee(t, path, cmd, "--help")
		require.Contains(t, out, "Usage:", cmd)
		require.Contains(t, out, "bee "+cmd, cmd)
		require.Contains(t, out, "-board", cmd)
	}
	require.Contains(t, out, "--json", "bee --help names --json")
	require.Equal(t, "bee "+version.Version+"\n", bee(t, path, "--version"))
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "--help and --version open no board")
}

// lineReader turns what a command writes into lines a test can wait for.
type lineReader struct {
	w     *io.PipeWriter
	lines chan string
	done  chan struct{}
}

func newLineReader() *lineReader {
	r, w := io.Pipe()
	l := &lineReader{w: w, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	return l
}

func (l *lineReader) Write(p []byte) (int, error) { return l.w.Write(p) }

// next returns the next line, failing the test after timeout (a bound,
// stretched by testtime.Factor).
func (l *lineReader) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	timeout = testtime.Bound(timeout)
	select {
	case line := <-l.lines:
		return line
	case <-time.After(timeout):
		t.Fatalf("no line within %v", timeout)
		return ""
	}
}

func (l *lineReader) close() {
	_ = l.w.Close()
	<-l.done
}

func TestMain_Watch(t *testing.T) {
	t.Parallel()
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "text", true: "json"}[asJSON], func(t *testing.T) {
			t.Parallel()
			path := boardPath(t)
			bee(t, path, "post", "before the watch")
			stdout, stderr := newLineReader(), newLineReader()
			m := &Main{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: func(string) string { return "" }}
			ctx, cancel := context.WithCancel(t.Context())
			args := []string{"--board", path, "watch"}
			if asJSON {
				args = append(args, "--json")
			}
			var wg sync.WaitGroup
			var runErr error
			wg.Go(func() { runErr = m.Run(ctx, args) })

			require.Contains(t, stderr.next(t, 10*time.Second), "watching "+path)
			b, err := board.Open(path, nil)
			require.NoError(t, err)
			defer b.Close()
			_, err = b.Post(t.Context(), "user:alice", actions.Draft{To: "worker", Title: "made while watching"})
			require.NoError(t, err)
			line := stdout.next(t, 10*time.Second)
			if asJSON {
				var rec actions.Record
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
				require.Equal(t, "a-2", rec.ID)
				require.Equal(t, actions.Open, rec.State)
			} else {
				require.Regexp(t, `^\d\d:\d\d:\d\d  a-2 +open +for worker +made while watching$`, line)
			}

			// A claim elsewhere shows too.
			who := identity.ID("agent:worker#12345678")
			_, err = b.Next(t.Context(), who, "", time.Second)
			require.NoError(t, err)
			line = stdout.next(t, 10*time.Second)
			require.Contains(t, line, "a-1")
			require.Contains(t, line, "claimed")

			cancel()
			wg.Wait()
			require.Equal(t, exitInterrupted, exitOf(runErr), "watch ends as interrupted: %v", runErr)
			stdout.close()
			stderr.close()
		})
	}
}

func requireUsage(t *testing.T, err error, contains string) {
	t.Helper()
	var ce *cliError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, exitUsage, ce.code, "%v", err)
	require.Contains(t, ce.Error(), contains)
	require.NotEmpty(t, ce.hint)
}

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		wantJSON bool
		wantArgs []string
	}{
		{[]string{"--json", "a-1"}, true, []string{"a-1"}},
		{[]string{"a-1", "--json"}, true, []string{"a-1"}},
		{[]string{"a-1"}, false, []string{"a-1"}},
		{[]string{"title", "-"}, false, []string{"title", "-"}},
		{[]string{"--", "--json", "x"}, false, []string{"--json", "x"}},
		{[]string{"t", "--", "--json"}, false, []string{"t", "--json"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		j := fs.Bool("json", false, "")
		require.NoError(t, parseInterspersed(fs, tc.args), "%q", tc.args)
		require.Equal(t, tc.wantJSON, *j, "%q", tc.args)
		require.Equal(t, tc.wantArgs, fs.Args(), "%q", tc.args)
	}
}
