package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/testtime"
)

// envRunAs makes the test binary run as bee itself (see TestMain), for the
// tests that need a real process: signals and exit codes as a shell sees
// them.
const envRunAs = "BEE_TEST_RUN_AS"

// beeProc returns a command that runs bee (this test binary, as bee) with
// args, in an environment without BEE_BOARD and with USER=tester, plus
// env.
func beeProc(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, board.EnvPath+"=") && !strings.HasPrefix(kv, "USER=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunAs+"=bee", "USER=tester")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// exitStatus is how a finished bee process ended, as a shell reports it.
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}

// A board for the exit code cases: a-1 open, a-2 claimed by a live
// worker, a-3 done, a-4 failed, a-5 cancelled.
func exitBoard(t *testing.T) string {
	t.Helper()
	path := newBoard(t)
	b, w := worker(t, path)
	ctx := t.Context()
	for _, title := range []string{"open one", "claimed one", "done one", "failed one", "cancelled one"} {
		_, err := b.Post(ctx, "user:tester", actions.Draft{Title: title})
		require.NoError(t, err)
	}
	for range 4 {
		claim(t, b, w)
	}
	_, err := b.Release(ctx, w, "a-1")
	require.NoError(t, err)
	_, err = b.Finish(ctx, w, "a-3", "ok")
	require.NoError(t, err)
	_, err = b.Fail(ctx, w, "a-4", "no disk")
	require.NoError(t, err)
	_, err = b.Cancel(ctx, "user:tester", "a-5", "not needed")
	require.NoError(t, err)
	return path
}

// Every command follows one exit code scheme: 0 done, 1 the board said no,
// 2 usage, 124 bee wait's timeout, 130 interrupted.
func TestMain_ExitCodes(t *testing.T) {
	t.Parallel()
	path := exitBoard(t)
	missing := filepath.Join(t.TempDir(), "missing.db")
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	require.NoError(t, os.WriteFile(garbage, bytes.Repeat([]byte("not a board "), 1000), 0o600))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	takenPort := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)

	type tc struct {
		args      []string
		board     string // path when ""
		want      int
		interrupt bool // cancel the context once the command runs
	}
	byCmd := map[string][]tc{
		"post": {
			{args: []string{"post", "another"}, want: exitOK},
			{args: []string{"post", "--to", "agent:nobody#12345678", "t"}, want: exitNo},
			{args: []string{"post"}, want: exitUsage},
			{args: []string{"post", "--bogus", "t"}, want: exitUsage},
			{args: []string{"post", "two\nlines"}, want: exitUsage},
			{args: []string{"post", "--priority", "9", "t"}, want: exitUsage},
			{args: []string{"post", "--after", "a-99", "t"}, want: exitNo},
			{args: []string{"post", "--plan", "-", "t"}, want: exitUsage},
		},
		"list": {
			{args: []string{"list"}, want: exitOK},
			{args: []string{"list"}, board: missing, want: exitNo},
			{args: []string{"list", "--state", "lost"}, want: exitUsage},
		},
		"show": {
			{args: []string{"show", "a-1"}, want: exitOK},
			{args: []string{"show", "a-99"}, want: exitNo},
			{args: []string{"show", "A-1"}, want: exitNo},
			{args: []string{"show"}, want: exitUsage},
		},
		"plan": {
			{args: []string{"plan", "a-1"}, want: exitOK},
			{args: []string{"plan", "a-99"}, want: exitNo},
			{args: []string{"plan"}, want: exitUsage},
		},
		"watch": {
			{args: []string{"watch"}, want: exitInterrupted, interrupt: true},
			{args: []string{"watch"}, board: garbage, want: exitNo},
			{args: []string{"watch", "extra"}, want: exitUsage},
		},
		"agents": {
			{args: []string{"agents"}, want: exitOK},
			{args: []string{"agents"}, board: missing, want: exitNo},
			{args: []string{"agents", "extra"}, want: exitUsage},
		},
		"wait": {
			{args: []string{"wait", "a-3"}, want: exitOK},
			{args: []string{"wait", "a-3", "--timeout", "0"}, want: exitOK},
			{args: []string{"wait", "a-3", "a-4"}, want: exitNo},
			{args: []string{"wait", "a-5"}, want: exitNo},
			{args: []string{"wait", "a-999", "--timeout", "1s"}, want: exitNo},
			{args: []string{"wait", "a-999", "--timeout", "0"}, want: exitNo},
			{args: []string{"wait"}, want: exitUsage},
			{args: []string{"wait", "a-1", "--timeout", "-5s"}, want: exitUsage},
			{args: []string{"wait", "a-1", "--timeout", "soon"}, want: exitUsage},
			{args: []string{"wait", "a-1", "--timeout", "100ms"}, want: exitTimeout},
			{args: []string{"wait", "a-1", "a-3", "--timeout", "0"}, want: exitTimeout},
			{args: []string{"wait", "a-1"}, want: exitInterrupted, interrupt: true},
		},
		"cancel": {
			{args: []string{"cancel", "a-99"}, want: exitNo},
			{args: []string{"cancel", "a-3"}, want: exitNo},
			{args: []string{"cancel"}, want: exitUsage},
			{args: []string{"cancel", "--from", "two words", "a-1"}, want: exitUsage},
		},
		"readdress": {
			{args: []string{"readdress", "a-2", "--to", "reviewer"}, want: exitNo}, // claimed
			{args: []string{"readdress", "a-99", "--to", "reviewer"}, want: exitNo},
			{args: []string{"readdress", "a-1", "--to", "agent:nobody#12345678"}, want: exitNo},
			{args: []string{"readdress", "a-1"}, want: exitUsage},
			{args: []string{"readdress", "a-1", "--to", "x", "--anyone"}, want: exitUsage},
		},
		"reservations": {
			{args: []string{"reservations", "--repo", "github.com/x/r"}, want: exitOK},
			{args: []string{"reservations", "--all"}, board: missing, want: exitNo},
			{args: []string{"reservations", "extra"}, want: exitUsage},
			{args: []string{"reservations", "--all", "--repo", "github.com/x/r"}, want: exitUsage},
			{args: []string{"reservations", "check", "--json"}, want: exitUsage}, // no request on stdin
		},
		"reserve": {
			{args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r", "src"}, want: exitOK},
			{args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r", "--from", "ann", "src/x"}, want: exitNo},
			{args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r"}, board: missing, want: exitUsage},
			{args: []string{"reserve", "--repo", "github.com/x/r", "src"}, want: exitUsage},
			{args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r", "../x"}, want: exitUsage},
			{args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r", "src"}, board: missing, want: exitNo},
		},
		"release": {
			{args: []string{"release", "--repo", "github.com/x/r", "src"}, want: exitOK},
			{args: []string{"release", "--all"}, board: missing, want: exitNo},
			{args: []string{"release", "--all", "src"}, want: exitUsage},
		},
		"inbox": {
			{args: []string{"inbox"}, want: exitOK},
			{args: []string{"inbox"}, board: missing, want: exitNo},
			{args: []string{"inbox", "extra"}, want: exitUsage},
			{args: []string{"inbox", "--as", "two words"}, want: exitUsage},
			{args: []string{"inbox", "--watch"}, want: exitInterrupted, interrupt: true},
		},
		"answer": {
			{args: []string{"answer", "a-1", "yes"}, want: exitNo}, // for anyone: an agent's to finish
			{args: []string{"answer", "a-99", "yes"}, want: exitNo},
			{args: []string{"answer", "a-3", "yes"}, want: exitNo}, // ended
			{args: []string{"answer", "a-1"}, want: exitUsage},
			{args: []string{"answer", "a-1", "  "}, want: exitUsage},
			{args: []string{"answer", "--as", "two words", "a-1", "yes"}, want: exitUsage},
		},
		"decline": {
			{args: []string{"decline", "a-1", "--reason", "no"}, want: exitNo},
			{args: []string{"decline", "a-1"}, want: exitUsage},
			{args: []string{"decline", "--reason", "no"}, want: exitUsage},
		},
		"backup": {
			{args: []string{"backup", filepath.Join(t.TempDir(), "copy.db")}, want: exitOK},
			{args: []string{"backup", path}, want: exitNo},
			{args: []string{"backup", filepath.Join(t.TempDir(), "copy.db")}, board: missing, want: exitNo},
			{args: []string{"backup"}, want: exitUsage},
			{args: []string{"backup", filepath.Join(t.TempDir(), "no", "copy.db")}, want: exitUsage},
		},
		"serve": {
			{args: []string{"serve"}, want: exitInterrupted, interrupt: true},
			{args: []string{"serve", "--port", takenPort}, want: exitNo},
			{args: []string{"serve", "--port", "-1"}, want: exitUsage},
		},
	}
	// The changes last, once the refusals above have seen the board as
	// it was.
	later := map[string][]tc{
		"post": { // a-7 and a-8: questions for the answer and the decline below
			{args: []string{"post", "--to", "user:tester", "approve?"}, want: exitOK},
			{args: []string{"post", "--to", "people", "which one?"}, want: exitOK},
		},
		"answer":    {{args: []string{"answer", "a-7", "yes"}, want: exitOK}},
		"decline":   {{args: []string{"decline", "a-8", "--reason", "neither"}, want: exitOK}},
		"cancel":    {{args: []string{"cancel", "a-1"}, want: exitOK}},
		"readdress": {{args: []string{"readdress", "a-6", "--to", "reviewer"}, want: exitOK}}, // a-6: post's "another"
	}
	for _, cmd := range commands {
		require.Contains(t, byCmd, cmd, "every command has its exit codes checked")
	}
	check := func(cmd string, c tc) {
		t.Helper()
		b := c.board
		if b == "" {
			b = path
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if c.interrupt {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
		var stdout, stderr bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(nil)}
		err := m.Run(ctx, append([]string{"--board", b}, c.args...))
		var msg bytes.Buffer
		code := exitCode(err, &msg)
		require.Equal(t, c.want, code, "bee %q: %s%s", c.args, stderr.String(), msg.String())
		switch code {
		case exitOK, exitInterrupted:
		default:
			require.NotEmpty(t, msg.String(), "bee %q says why it exits %d", c.args, code)
		}
		if code == exitUsage {
			require.Contains(t, msg.String(), "\nTry: ", "a usage error says what to run instead")
		}
	}
	for _, cmd := range commands {
		for _, c := range byCmd[cmd] {
			check(cmd, c)
		}
	}
	for _, cmd := range commands {
		for _, c := range later[cmd] {
			check(cmd, c)
		}
	}

	// And bee itself.
	for _, c := range []tc{
		{args: []string{"--help"}, want: exitOK},
		{args: []string{"help"}, want: exitOK},
		{args: []string{"frobnicate"}, want: exitUsage},
		{args: []string{"--json", "list"}, want: exitUsage},
		{args: []string{}, want: exitUsage},
	} {
		check("", c)
	}
}

// testEnv is an environment of USER=tester and env.
func testEnv(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "USER" {
			return "tester"
		}
		return ""
	}
}

// The first SIGINT ends bee with 130 and SIGTERM with 143, as a shell
// reports a command a signal ended; bee cleans up first (the board is
// closed, and nothing is left on stdout).
func TestMain_SignalExitCodes(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := beeProc(t, nil, "--board", path, "watch")
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stderr)
		require.True(t, lines.Scan(), "bee watch says it watches")
		require.Contains(t, lines.Text(), "watching "+path)
		require.NoError(t, cmd.Process.Signal(sig))
		for lines.Scan() {
			t.Logf("stderr after %v: %s", sig, lines.Text())
		}
		require.Equal(t, 128+int(sig), exitStatus(t, cmd.Wait()), "after %v", sig)
	}
}

// bee wait's --timeout: absent waits as long as it takes, 0 looks once
// without waiting, a negative one is refused.
func TestMain_WaitTimeoutZero(t *testing.T) {
	t.Parallel()
	path := exitBoard(t)
	start := time.Now()
	out, _, err := run(t, path, "", "wait", "a-3", "a-1", "--timeout", "0")
	require.Equal(t, exitTimeout, exitOf(err), "%v", err)
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "--timeout 0 does not wait")
	require.Equal(t, "a-3 done by agent:worker#0000000c: ok\n", out, "what has ended is reported")
	require.EqualError(t, err, "bee wait: --timeout 0s passed; not ended yet: a-1")

	out, _, err = run(t, path, "", "wait", "a-3", "--timeout", "0", "--json")
	require.NoError(t, err)
	require.Contains(t, out, `"id": "a-3"`)

	_, _, err = run(t, path, "", "wait", "a-1", "--timeout", "-1ns")
	requireUsage(t, err, "--timeout -1ns is negative")

	out, _, err = run(t, path, "", "wait", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--timeout 0 looks once")
	require.Contains(t, out, "exit 124")
	require.Contains(t, out, "A negative --timeout is refused")
}

// bee --help gives the exit codes, the same for every command.
func TestMain_HelpSaysExitCodes(t *testing.T) {
	t.Parallel()
	out := bee(t, boardPath(t), "--help")
	for _, line := range []string{"0    done", "1    the board said no", "2    the command line is wrong", "124  bee wait: --timeout passed", "130  interrupted"} {
		require.Contains(t, out, line)
	}
}

// --board and $BEE_BOARD: an empty one is refused, not taken for the
// default board, and so is a board file in a folder that does not exist.
func TestMain_BoardLocationRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	invoke := func(env map[string]string, lookup bool, args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: testEnv(env)}
		if lookup {
			m.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		}
		err := m.Run(t.Context(), args)
		return stderr.String(), err
	}

	for _, args := range [][]string{{"--board", "", "post", "t"}, {"post", "--board", "", "t"}, {"--board", " ", "list"}} {
		_, err := invoke(nil, true, args...)
		requireUsage(t, err, "--board is empty")
	}
	_, err := invoke(map[string]string{board.EnvPath: ""}, true, "post", "t")
	requireUsage(t, err, "$BEE_BOARD is set but empty")
	var msg bytes.Buffer
	exitCode(err, &msg)
	require.Contains(t, msg.String(), "Try: unset BEE_BOARD")

	// --board wins over $BEE_BOARD, even an empty one.
	path := filepath.Join(dir, "board.db")
	_, err = invoke(map[string]string{board.EnvPath: ""}, true, "--board", path, "post", "t")
	require.NoError(t, err)

	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--board", filepath.Join(dir, "made", "up", "board.db"), "post", "t"}},
		{nil, []string{"watch", "--board", filepath.Join(dir, "made", "up", "board.db")}},
		{map[string]string{board.EnvPath: filepath.Join(dir, "made", "up", "board.db")}, []string{"list"}},
	} {
		_, err := invoke(c.env, true, c.args...)
		requireUsage(t, err, "the folder "+filepath.Join(dir, "made", "up")+" of the board")
		msg.Reset()
		exitCode(err, &msg)
		require.Contains(t, msg.String(), "mkdir -p "+filepath.Join(dir, "made", "up"))
		require.NoDirExists(t, filepath.Join(dir, "made"), "nothing is created")
	}
}

// The default board's folder, ~/.bee, is made when first needed.
func TestMain_DefaultBoardFolderIsMade(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out, err := beeProc(t, []string{"HOME=" + home}, "post", "first").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.FileExists(t, filepath.Join(home, ".bee", "board.db"))
	require.Contains(t, string(out), "created a new board at "+filepath.Join(home, ".bee", "board.db"))
}

// A board's sentinel errors are all known to refusal.
func TestRefusal_KnowsTheSentinels(t *testing.T) {
	t.Parallel()
	for _, s := range wrongInput {
		require.True(t, slices.Contains(sentinels, s), "%v", s)
	}
	require.Equal(t, `action a-1 is held by agent:w#12345678; it can be re-addressed once it is released (or cancel it)`,
		plainBoardText(`readdress: action a-1 is held by agent:w#12345678; it can be re-addressed once it is released (or cancel it): action is not open`))
	require.Equal(t, `to agent:x#12345678: it never joined this board`,
		plainBoardText(`readdress a-1: to agent:x#12345678: it never joined this board: identity is not live`))
	require.Equal(t, `action "a-9"`, plainBoardText(`cancel action "a-9": unknown action`))
	require.Equal(t, `posted nothing: post`, plainBoardText(`posted nothing: post`), "only a leading operation goes")
	require.True(t, errors.Is(refusedf(actions.ErrEnded, "", "x"), actions.ErrEnded))
}
