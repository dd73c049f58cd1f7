package guardflow

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/bridgetest"
	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/runfile"
)

// bin holds the binaries built for this package's tests: bee-mcp,
// bee-hook and the stand-in claude, and, once a test asks (built), bee and
// a Go program that does nothing (noop).
var bin string

func TestMain(m *testing.M) {
	bridgetest.Main(m, &bin, standInClaude)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// built builds bee and noop into bin, once, and returns bin. Under -short
// it skips t: bridgetest.Main builds nothing then, and bin is empty.
func built(t testing.TB) string {
	t.Helper()
	testbin.SkipShort(t)
	buildOnce.Do(func() {
		noop := filepath.Join(bin, "noop.go")
		if buildErr = os.WriteFile(noop, []byte("package main\n\nfunc main() {}\n"), 0o644); buildErr != nil {
			return
		}
		for _, args := range [][]string{
			{"build", "-o", filepath.Join(bin, "bee"), "github.com/tractat-us/bee/cmd/bee"},
			{"build", "-o", filepath.Join(bin, "noop"), noop},
		} {
			if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return bin
}

// standInClaude is the claude process: bee-mcp is its direct child, in
// its working directory, and shares its stdin and stdout (the test talks
// MCP through them); hook commands arrive on fd 3 and what each did
// leaves on fd 4, one JSON line each.
func standInClaude(si bridgetest.StandIn) int {
	ctl, answers := os.NewFile(3, "control"), os.NewFile(4, "answers")
	bridge := exec.Command(filepath.Join(si.Bin, "bee-mcp"), "--agent", "guardtest")
	bridge.Stdin, bridge.Stdout, bridge.Stderr = os.Stdin, os.Stdout, os.Stderr
	bridge.Env = append(os.Environ(), "CLAUDECODE=1") // as Claude Code adds
	if err := bridge.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in claude:", err)
		return 1
	}
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		_ = bridge.Wait()
	}()
	enc := json.NewEncoder(answers)
	sc := bufio.NewScanner(ctl)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var c hookCommand
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			_ = enc.Encode(hookRun{Err: err.Error()})
			continue
		}
		_ = enc.Encode(runHook(c))
	}
	<-reaped
	return 0
}

// runHook runs c as Claude Code runs a hook: /bin/sh -c, the input on
// stdin, CLAUDE_PID in the environment.
func runHook(c hookCommand) hookRun {
	hook := exec.Command("/bin/sh", "-c", c.Command)
	hook.Env = append(append(os.Environ(), "CLAUDE_PID="+strconv.Itoa(os.Getpid())), c.Env...)
	hook.Dir = c.Dir
	hook.Stdin = strings.NewReader(c.Input)
	var stdout, stderr strings.Builder
	hook.Stdout, hook.Stderr = &stdout, &stderr
	start := time.Now()
	err := hook.Run()
	took := time.Since(start)
	r := hookRun{Stdout: stdout.String(), Stderr: stderr.String(), Err: fmt.Sprint(err), Took: took}
	if st := hook.ProcessState; st != nil {
		r.Exit = st.ExitCode()
		r.CPU = st.UserTime() + st.SystemTime()
	}
	return r
}

// A hookCommand is one hook for the stand-in claude to run.
type hookCommand struct {
	Command string   // run by /bin/sh -c
	Input   string   // the hook's stdin
	Dir     string   // its working directory; "" for the stand-in's
	Env     []string // added to its environment
}

// A hookRun is what one hook did, and how long it took from the shell's
// start to its exit, as Claude Code would see it.
type hookRun struct {
	Stdout, Stderr string
	Exit           int
	Err            string
	Took, CPU      time.Duration
}

// A session is one stand-in claude with its bridge, in a directory.
type session struct {
	t         testing.TB
	claudePID int
	runDir    string
	mcp       *bridgetest.Proc
	ctl       io.WriteCloser
	answers   *bufio.Scanner
	nextID    int
}

// start starts a session in dir on the board at board, with the run
// directory runDir.
func start(t testing.TB, dir, board, runDir string) *session {
	t.Helper()
	testbin.SkipShort(t) // bridgetest.Main built nothing
	ctlR, ctlW, err := os.Pipe()
	require.NoError(t, err)
	ansR, ansW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "claude"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), bridgetest.StandIn{Bin: bin}.Env(),
		"BEE_RUN_DIR="+runDir, "BEE_BOARD="+board, "BEE_LOG_LEVEL=debug")
	cmd.ExtraFiles = []*os.File{ctlR, ansW}
	s := &session{t: t, runDir: runDir, mcp: bridgetest.Start(t, cmd), ctl: ctlW}
	ctlR.Close()
	ansW.Close()
	s.answers = bufio.NewScanner(ansR)
	s.answers.Buffer(make([]byte, 1<<20), 64<<20)
	t.Cleanup(func() {
		ctlW.Close()
		ansR.Close()
	})
	s.claudePID = cmd.Process.Pid
	s.mcp.Initialize()
	require.Eventually(t, func() bool {
		_, err := os.Stat(runfile.Path(runDir, s.claudePID))
		return err == nil
	}, 20*time.Second, 2*time.Millisecond, "the bridge writes its run file")
	return s
}

// hook runs c under the stand-in claude.
func (s *session) hook(c hookCommand) hookRun {
	s.t.Helper()
	line, err := json.Marshal(c)
	require.NoError(s.t, err)
	_, err = s.ctl.Write(append(line, '\n'))
	require.NoError(s.t, err)
	got := make(chan bool, 1)
	go func() { got <- s.answers.Scan() }()
	select {
	case ok := <-got:
		require.True(s.t, ok, "stand-in claude stopped answering")
	case <-time.After(60 * time.Second):
		s.t.Fatal("no answer from the stand-in claude")
	}
	var r hookRun
	require.NoError(s.t, json.Unmarshal(s.answers.Bytes(), &r))
	return r
}

// tool calls a tool of the session's bridge and returns its result, its
// structured content decoded into out when out is not nil.
func (s *session) tool(name string, args any, out any) bridgetest.ToolResult {
	s.t.Helper()
	s.nextID++
	s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall(name, args, nil))
	r := s.mcp.DecodeResult(s.mcp.Await(s.nextID, 20*time.Second))
	if out != nil {
		require.NoError(s.t, json.Unmarshal(r.StructuredContent, out), "%s: %s", name, r.Text())
	}
	return r
}

// identity is the session's identity now.
func (s *session) identity() string {
	s.t.Helper()
	var w struct {
		Identity string `json:"identity"`
		Repo     string `json:"repo"`
	}
	s.tool("bee_whoami", nil, &w)
	return w.Identity
}

// guardInput is the PreToolUse input of tool writing file, from cwd.
func guardInput(tool, cwd, file string) string {
	b, err := json.Marshal(map[string]any{
		"session_id": "guardflow", "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": tool,
		"tool_input": map[string]any{"file_path": file, "old_string": "package auth", "new_string": "package auth // edited"},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// git runs git in dir, with no configuration but the repository's own,
// and returns its output; it fails the test when git fails.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(dir, nil, args...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// gitCmd is git in dir, in the environment base (nil: this process's)
// with no git configuration but the repository's own.
func gitCmd(dir string, base []string, args ...string) *exec.Cmd {
	if base == nil {
		base = os.Environ()
	}
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(slices.Clone(base), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=bee", "GIT_AUTHOR_EMAIL=bee@example.com", "GIT_COMMITTER_NAME=bee", "GIT_COMMITTER_EMAIL=bee@example.com")
	return cmd
}

// beeCmd is the built bee with args, in dir, in the environment env.
func beeCmd(t testing.TB, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(built(t), "bee"), args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// newRepo makes a repository whose origin is url in a fresh folder, with
// src/auth/login.go and README.md committed, and returns its root.
func newRepo(t testing.TB, url string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	dir = filepath.Join(dir, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "auth"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "auth", "login.go"), []byte("package auth\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# repo\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "remote", "add", "origin", url)
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}
