package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/hooks"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/internal/version"
	"github.com/tractat-us/bee/runfile"
)

// runAsEnv makes the test binary impersonate a process (see TestMain).
const runAsEnv = "BEE_TEST_RUN_AS"

func TestMain(m *testing.M) {
	switch os.Getenv(runAsEnv) {
	case "":
		os.Exit(m.Run())
	case "claude":
		os.Exit(runAsClaude())
	case "bee-hook":
		main()
	case "claude-parent":
		os.Exit(runAsClaudeParent())
	case "claude-command":
		os.Exit(runAsClaudeCommand())
	case "claude-bench":
		os.Exit(runAsClaudeBench())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", runAsEnv, os.Getenv(runAsEnv))
		os.Exit(2)
	}
}

// runAsClaude is a stand-in claude process: once a line arrives on its
// stdin (the test has written its run file by then), it runs bee-hook the
// way Claude Code does, through sh -c, with the /clear input on stdin, and
// passes bee-hook's stdout and stderr through.
func runAsClaude() int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go-ahead:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := exec.Command("/bin/sh", "-c", `"$0"; exit $?`, exe)
	cmd.Env = append(os.Environ(), runAsEnv+"=bee-hook")
	cmd.Stdin = strings.NewReader(`{"session_id":"s2","transcript_path":"/t/s2.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// failWriter fails the test on any write: what a hook run's stdout must be.
type failWriter struct{ t testing.TB }

func (w failWriter) Write(p []byte) (int, error) {
	w.t.Errorf("wrote %q to stdout", p)
	return 0, errors.New("stdout must stay empty")
}

// fixture is a run directory holding a run file for claude pid 4242, with
// fakes for the bridge.
type fixture struct {
	dir     string
	entry   runfile.Entry
	mu      sync.Mutex
	retires []clearctl.RetireRequest
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	f := &fixture{dir: t.TempDir(), entry: runfile.Entry{Port: 40123, Token: tok, PID: 5151}}
	require.NoError(t, runfile.Write(f.dir, 4242, f.entry))
	return f
}

// base is a Config whose bridge is alive and retires, echoing the session
// id into the new identity.
func (f *fixture) base() hooks.Config {
	return hooks.Config{
		Retire: func(_ context.Context, port int, token string, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
			f.mu.Lock()
			f.retires = append(f.retires, req)
			f.mu.Unlock()
			if port != f.entry.Port || token != f.entry.Token {
				return clearctl.RetireResponse{}, &clearctl.StatusError{Code: 401}
			}
			return clearctl.RetireResponse{Retired: "agent:x#aaaaaaaa", Current: "agent:x#bbbbbbbb " + req.SessionID}, nil
		},
		Bridge: hooks.Bridge{
			Alive:    func(int) bool { return true },
			Listener: func(int, int) error { return nil },
		},
	}
}

func (f *fixture) args(extra ...string) []string {
	return append([]string{"--claude-pid", "4242", "--run-dir", f.dir}, extra...)
}

func TestRun_Hook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stdin, stderr string
	}{
		{"startup prints nothing", `{"source":"startup","session_id":"s1"}`, ""},
		{"clear retires", `{"source":"clear","session_id":"s2"}`, "bee-hook: retired agent:x#aaaaaaaa -> agent:x#bbbbbbbb s2\n"},
		{"bad json", `{"source":`, "bee-hook: cannot read SessionStart input: unexpected end of JSON input\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var stderr bytes.Buffer
			code := runWith(t.Context(), f.base(), hooks.WaitConfig{}, f.args(), strings.NewReader(tc.stdin), failWriter{t}, &stderr)
			require.Equal(t, 0, code)
			require.Equal(t, tc.stderr, stderr.String())
		})
	}
}

func TestRun_AlwaysExitsZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown flag", []string{"--bogus"}, "bee-hook: flag provided but not defined: -bogus (see bee-hook --help)\n"},
		{"argument", []string{"clear"}, `bee-hook: unexpected argument "clear" (see bee-hook --help)` + "\n"},
		{"negative pid", []string{"--claude-pid", "-3"}, "bee-hook: --claude-pid must be a positive pid, not -3 (see bee-hook --help)\n"},
		{"bad pid", []string{"--claude-pid", "x"}, `bee-hook: invalid value "x" for flag -claude-pid: parse error (see bee-hook --help)` + "\n"},
		{"zero timeout", []string{"--timeout", "0s"}, "bee-hook: --timeout must be positive, not 0s (see bee-hook --help)\n"},
		{"no run file", []string{"--claude-pid", "77"}, "bee-hook: no bridge registered for claude pid 77 in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var stderr bytes.Buffer
			args := append([]string{"--run-dir", f.dir}, tc.args...)
			code := runWith(t.Context(), f.base(), hooks.WaitConfig{}, args, strings.NewReader(`{"source":"clear"}`), failWriter{t}, &stderr)
			require.Equal(t, 0, code)
			require.True(t, strings.HasPrefix(stderr.String(), tc.stderr), "stderr %q", stderr.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line")
		})
	}
}

func TestRun_Timeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.base()
	base.Retire = func(ctx context.Context, _ int, _ string, _ clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		<-ctx.Done()
		return clearctl.RetireResponse{}, ctx.Err()
	}
	var stderr bytes.Buffer
	start := time.Now()
	code := runWith(t.Context(), base, hooks.WaitConfig{}, f.args("--timeout", "50ms"), strings.NewReader(`{"source":"clear"}`), failWriter{t}, &stderr)
	require.Equal(t, 0, code)
	require.Less(t, time.Since(start), testtime.Bound(2*time.Second))
	require.Contains(t, stderr.String(), "50ms")
}

func TestRun_List(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A child that has been reaped stands for a dead bridge.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	tokA, err := runfile.NewToken()
	require.NoError(t, err)
	tokB, err := runfile.NewToken()
	require.NoError(t, err)
	require.NoError(t, runfile.Write(dir, 300, runfile.Entry{Port: 40300, Token: tokA, PID: os.Getpid()}))
	require.NoError(t, runfile.Write(dir, 20, runfile.Entry{Port: 40020, Token: tokB, PID: dead.Process.Pid}))
	require.NoError(t, os.WriteFile(runfile.Path(dir, 5), []byte("junk"), 0o600))

	var stdout, stderr bytes.Buffer
	// stdin would fail the test if read.
	code := run(t.Context(), []string{"--list", "--run-dir", dir}, failReader{t}, &stdout, &stderr)
	require.Equal(t, 0, code)
	require.Empty(t, stderr.String())
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	require.Len(t, lines, 5, stdout.String())
	require.Equal(t, "run directory "+dir, lines[0])
	require.Regexp(t, `^AGENT PID +CLIENT +BRIDGE PID +BRIDGE +PORT *$`, lines[1])
	require.Regexp(t, `^5 +\S+ +- +unreadable +- +run file .*5\.json: read: malformed run file`, lines[2])
	require.Regexp(t, fmt.Sprintf(`^20 +\S+ +%d +stale +40020 *$`, dead.Process.Pid), lines[3])
	require.Regexp(t, fmt.Sprintf(`^300 +\S+ +%d +alive +40300 *$`, os.Getpid()), lines[4])
	require.NotContains(t, stdout.String(), tokA)
	require.NotContains(t, stdout.String(), tokB)
	require.FileExists(t, runfile.Path(dir, 20), "--list removes nothing")

	stdout.Reset()
	empty := filepath.Join(t.TempDir(), "none")
	code = run(t.Context(), []string{"--list", "--run-dir", empty}, failReader{t}, &stdout, &stderr)
	require.Equal(t, 0, code)
	require.Equal(t, "no bridges registered in "+empty+"\n", stdout.String())
}

// failReader fails the test if read.
type failReader struct{ t testing.TB }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("stdin must not be read")
	return 0, errors.New("stdin must not be read")
}

func TestRun_PrintConfigHelpVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg  string
		want func(t *testing.T, stdout string)
	}{
		{"--print-config", func(t *testing.T, stdout string) {
			exe, err := os.Executable()
			require.NoError(t, err)
			require.Equal(t, hooks.ConfigFor(shellQuote(exe)), stdout, "the config names this binary by its absolute path")
		}},
		{"--help", func(t *testing.T, stdout string) {
			require.Contains(t, stdout, `echo '{"source":"clear"}' | bee-hook`)
			require.Contains(t, stdout, "-claude-pid pid")
			require.Contains(t, stdout, "always exits 0")
		}},
		{"-h", func(t *testing.T, stdout string) { require.Contains(t, stdout, "Usage: bee-hook") }},
		{"--version", func(t *testing.T, stdout string) { require.Equal(t, "bee-hook "+version.Version+"\n", stdout) }},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{tc.arg}, failReader{t}, &stdout, &stderr)
			require.Equal(t, 0, code)
			require.Empty(t, stderr.String())
			tc.want(t, stdout.String())
		})
	}
}

// TestBeeHook_RealClaudeChain runs the real thing end to end: a stand-in
// claude (the test binary under that name) runs bee-hook through sh -c,
// bee-hook finds it by the ancestry rule, reads the run file registered for
// it and retires through a real clearctl server with the real client.
func TestBeeHook_RealClaudeChain(t *testing.T) {
	t.Parallel()
	srv, token, got := retiringBridge(t, nil)
	stdout, stderr := clearThroughClaude(t, srv.Port(), token)
	require.Empty(t, stdout, "a hook writes nothing to stdout")
	require.Equal(t, "bee-hook: retired agent:e2e#aaaaaaaa -> agent:e2e#bbbbbbbb\n", stderr)
	require.Equal(t, []clearctl.RetireRequest{{SessionID: "s2", TranscriptPath: "/t/s2.jsonl"}}, got())
}

// retiringBridge serves the control channel with a fresh token, retiring
// agent:e2e#aaaaaaaa into agent:e2e#bbbbbbbb, and returns what it retired
// so far through got.
func retiringBridge(t *testing.T, opts *clearctl.Options) (srv *clearctl.Server, token string, got func() []clearctl.RetireRequest) {
	t.Helper()
	token, err := runfile.NewToken()
	require.NoError(t, err)
	var mu sync.Mutex
	var reqs []clearctl.RetireRequest
	srv = clearctl.New(token, clearctl.RetirerFunc(func(_ context.Context, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		return clearctl.RetireResponse{Retired: "agent:e2e#aaaaaaaa", Current: "agent:e2e#bbbbbbbb"}, nil
	}), opts)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { _ = srv.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(testtime.Bound(5 * time.Second)):
			t.Error("clearctl Server.Close did not return within 5s")
		}
	})
	return srv, token, func() []clearctl.RetireRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]clearctl.RetireRequest(nil), reqs...)
	}
}

// clearThroughClaude types /clear, as far as bee is concerned: a stand-in
// claude whose run file names the bridge on port runs bee-hook, and this
// returns bee-hook's stdout and stderr.
func clearThroughClaude(t *testing.T, port int, token string) (stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	claude := filepath.Join(t.TempDir(), "claude")
	require.NoError(t, os.Symlink(exe, claude))
	runDir := filepath.Join(t.TempDir(), "run")

	ctx, cancel := context.WithTimeout(t.Context(), testtime.Bound(20*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, claude)
	cmd.Env = append(os.Environ(), runAsEnv+"=claude", runfile.EnvDir+"="+runDir,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goAhead, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())

	// This test process stands for the bridge: alive, and serving on port.
	require.NoError(t, runfile.Write(runDir, cmd.Process.Pid, runfile.Entry{Port: port, Token: token, PID: os.Getpid()}))
	_, err = goAhead.Write([]byte("go\n"))
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), "stderr: %s", errOut.String())
	return out.String(), errOut.String()
}

// --list prints what it found inert: a run directory's name can hold
// escape sequences, and so can the errors that quote it.
func TestRun_ListEscapesNames(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run\x1b]0;pwned\a\x1b[2J\u202e")
	require.NoError(t, runfile.EnsureDir(dir))
	require.NoError(t, os.WriteFile(runfile.Path(dir, 5), []byte("junk"), 0o600))
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--list", "--run-dir", dir}, failReader{t}, &stdout, &stderr)
	require.Equal(t, 0, code)
	out := stdout.String()
	require.NotContains(t, out, "\x1b")
	require.NotContains(t, out, "\a")
	require.NotContains(t, out, "\u202e")
	require.Contains(t, out, `run\x1b]0;pwned\x07\x1b[2J\u202e`)
	require.Regexp(t, `(?m)^5 +\S+ +- +unreadable +- +run file .*run\\x1b\]0;pwned.*5\.json: read: malformed run file`, out)
}

// runAsClaudeParent is a claude under another name with a bridge child (a
// sleep): it prints the child's pid and waits for stdin to close.
func runAsClaudeParent() int {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(child.Process.Pid)
	io.Copy(io.Discard, os.Stdin)
	child.Process.Kill()
	child.Wait()
	return 0
}

// A claude process running under another name is pointed out: it is found
// only by the fallbacks ($CLAUDE_PID for the hook, the parent for its
// bridge).
func TestRun_ListNotesClaudeUnderAnotherName(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	claude := filepath.Join(t.TempDir(), "claude-2.1.328")
	require.NoError(t, os.Symlink(exe, claude))
	cmd := exec.Command(claude)
	cmd.Env = append(os.Environ(), runAsEnv+"=claude-parent")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	var bridgePID int
	_, err = fmt.Fscan(out, &bridgePID)
	require.NoError(t, err)

	dir := t.TempDir()
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	require.NoError(t, runfile.Write(dir, cmd.Process.Pid, runfile.Entry{Port: 40300, Token: tok, PID: bridgePID}))
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"--list", "--run-dir", dir}, failReader{t}, &stdout, &stderr))
	require.Contains(t, stdout.String(), fmt.Sprintf(`note: claude pid %d runs as "claude-2.1.328", not as claude: its bridge took it as its parent (parent with CLAUDECODE=1) and the /clear hook finds it by $CLAUDE_PID`, cmd.Process.Pid))
}
