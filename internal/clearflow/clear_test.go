package clearflow

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/bridgetest"
	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/runfile"
)

// bin holds the binaries built for this package's tests.
var bin string

func TestMain(m *testing.M) {
	bridgetest.Main(m, &bin, standInClaude, versionedClaude, standInCodex, standInGemini)
}

// versionedClaude is the stand-in claude's other command name.
const versionedClaude = "claude-2.1.328"

// standInClaude is the claude process: bee-mcp is its direct child and
// shares its stdin and stdout (the test talks MCP through them); commands
// arrive on fd 3 and answers leave on fd 4, one JSON line each. A second
// bridge, when a command asks for one, gets fd 5 as its stdin and fd 6 as
// its stdout.
func standInClaude(si bridgetest.StandIn) int {
	ctl := os.NewFile(3, "control")
	answers := os.NewFile(4, "answers")
	secondIn, secondOut := os.NewFile(5, "second-stdin"), os.NewFile(6, "second-stdout")
	bridge := exec.Command(filepath.Join(si.Bin, "bee-mcp"), "--agent", "cleartest")
	bridge.Stdin, bridge.Stdout, bridge.Stderr = os.Stdin, os.Stdout, os.Stderr
	// What Claude Code adds to an MCP server's environment.
	bridge.Env = append(os.Environ(), "CLAUDECODE=1")
	if err := bridge.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in claude:", err)
		return 1
	}
	// Reap the bridge as soon as it ends, as Claude Code does, so a killed
	// bridge is gone rather than a zombie that signal 0 still finds.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		bridge.Wait()
		// Report how the bridge ended, for the tests of its endings.
		if f := si.ExitFile; f != "" {
			st := bridge.ProcessState
			ws, _ := st.Sys().(syscall.WaitStatus)
			b, _ := json.Marshal(bridgeExit{Code: st.ExitCode(), Signaled: ws.Signaled(), Signal: ws.Signal().String(), At: time.Now()})
			os.WriteFile(f+".tmp", b, 0o600)
			os.Rename(f+".tmp", f)
		}
	}()
	enc := json.NewEncoder(answers)
	enc.Encode(map[string]any{"bridgePid": bridge.Process.Pid})
	sc := bufio.NewScanner(ctl)
	for sc.Scan() {
		// Each command names a hook command and its SessionStart input; it
		// runs as Claude Code runs hooks: /bin/sh -c <command>, input on
		// stdin.
		var c hookCommand
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			enc.Encode(hookRun{Err: err.Error()})
			continue
		}
		if c.Spawn {
			// Another MCP server entry (or a /mcp reconnect) starts a
			// second bridge under the same claude.
			second := exec.Command(filepath.Join(si.Bin, "bee-mcp"), "--agent", "cleartest")
			second.Env = append(append(os.Environ(), "CLAUDECODE=1"), c.Env...)
			second.Stdin, second.Stdout = secondIn, secondOut
			errFile, err := os.Create(c.Stderr)
			if err == nil {
				second.Stderr = errFile
				err = second.Start()
			}
			if err != nil {
				enc.Encode(map[string]any{"err": err.Error()})
				continue
			}
			go func() { second.Wait(); errFile.Close() }()
			enc.Encode(map[string]any{"bridgePid": second.Process.Pid})
			continue
		}
		hook := exec.Command("/bin/sh", "-c", c.Command)
		// What Claude Code adds to a hook's environment.
		hook.Env = append(os.Environ(), "CLAUDE_PID="+strconv.Itoa(os.Getpid()))
		hook.Stdin = strings.NewReader(c.Input)
		var stdout, stderr strings.Builder
		hook.Stdout, hook.Stderr = &stdout, &stderr
		start := time.Now()
		err := hook.Run()
		enc.Encode(hookRun{Stdout: stdout.String(), Stderr: stderr.String(), Exit: hook.ProcessState.ExitCode(), Err: fmt.Sprint(err), Took: time.Since(start)})
	}
	<-reaped
	return 0
}

// bridgeExit is how the bridge under the stand-in claude ended, and when
// the stand-in reaped it.
type bridgeExit struct {
	Code     int
	Signaled bool
	Signal   string
	At       time.Time
}

type hookCommand struct {
	Command string // run by /bin/sh -c
	Input   string // the hook's stdin

	// Spawn starts a second bee-mcp instead, with Env added to the first
	// one's environment and its stderr written to the file Stderr.
	Spawn  bool
	Env    []string
	Stderr string
}

type hookRun struct {
	Stdout, Stderr string
	Exit           int
	Err            string
	Took           time.Duration
}

// session is one stand-in claude with its bridge.
type session struct {
	t         testing.TB
	claudePID int
	bridgePID int
	runDir    string
	board     string
	exitFile  string
	mcp       *bridgetest.Proc
	ctl       io.WriteCloser
	answers   *bufio.Scanner
	nextID    int
	// The second bridge's stdin and stdout, when one is spawned.
	secondIn  *os.File
	secondOut *os.File
	secondPID int
}

func start(t testing.TB, source string) *session {
	t.Helper()
	return startAs(t, source, "claude")
}

// startAs starts a session whose stand-in claude runs under the command
// name name.
func startAs(t testing.TB, source, name string) *session {
	t.Helper()
	dir := t.TempDir()
	s := &session{t: t, runDir: filepath.Join(dir, "run"), board: filepath.Join(dir, "board.db"), exitFile: filepath.Join(dir, "bridge-exit.json")}
	ctlR, ctlW, err := os.Pipe()
	require.NoError(t, err)
	ansR, ansW, err := os.Pipe()
	require.NoError(t, err)
	secondInR, secondInW, err := os.Pipe()
	require.NoError(t, err)
	secondOutR, secondOutW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, name))
	cmd.Env = append(os.Environ(),
		bridgetest.StandIn{Bin: bin, ExitFile: s.exitFile}.Env(),
		"BEE_RUN_DIR="+s.runDir, "BEE_BOARD="+s.board, "BEE_SOURCE="+source, "BEE_LOG_LEVEL=debug",
		// A wait in flight shows by its progress; a bridge checks often
		// whether its run file was taken over.
		"BEE_PROGRESS_INTERVAL=50ms", "BEE_WATCH_EVERY=20ms")
	cmd.ExtraFiles = []*os.File{ctlR, ansW, secondInR, secondOutW}
	s.mcp = bridgetest.Start(t, cmd)
	ctlR.Close()
	ansW.Close()
	secondInR.Close()
	secondOutW.Close()
	s.secondIn, s.secondOut = secondInW, secondOutR
	s.ctl = ctlW
	s.answers = bufio.NewScanner(ansR)
	t.Cleanup(func() {
		ctlW.Close()
		ansR.Close()
		secondInW.Close()
		secondOutR.Close()
		syscall.Kill(s.bridgePID, syscall.SIGKILL)
		if s.secondPID != 0 {
			// Gone before the temporary directories it writes to are removed.
			syscall.Kill(s.secondPID, syscall.SIGKILL)
			assert.Eventually(t, func() bool { return syscall.Kill(s.secondPID, 0) != nil }, 10*time.Second, 5*time.Millisecond,
				"the second bridge outlived SIGKILL")
		}
	})
	s.claudePID = cmd.Process.Pid
	var hello struct{ BridgePid int }
	s.answer(&hello)
	s.bridgePID = hello.BridgePid
	s.mcp.Initialize()
	if name == standInCodex {
		return s // no run file under Codex: see clients_test.go
	}
	// The bridge writes its run file while it answers the handshake, as
	// under Claude Code, where /clear comes long after: a hook run before
	// the file is there would find no bridge.
	require.Eventually(t, func() bool {
		_, err := os.Stat(s.runFile())
		return err == nil
	}, 10*time.Second, 2*time.Millisecond, "the bridge writes its run file")
	return s
}

func (s *session) answer(v any) {
	s.t.Helper()
	got := make(chan bool, 1)
	go func() { got <- s.answers.Scan() }()
	select {
	case ok := <-got:
		require.True(s.t, ok, "stand-in claude stopped answering")
		require.NoError(s.t, json.Unmarshal(s.answers.Bytes(), v))
	case <-time.After(30 * time.Second):
		s.t.Fatal("no answer from the stand-in claude")
	}
}

// hook runs bee-hook under the stand-in claude with the given input.
func (s *session) hook(input string) hookRun {
	s.t.Helper()
	return s.runHook(filepath.Join(bin, "bee-hook"), input)
}

// runHook runs the hook command under the stand-in claude.
func (s *session) runHook(command, input string) hookRun {
	s.t.Helper()
	line, err := json.Marshal(hookCommand{Command: command, Input: input})
	require.NoError(s.t, err)
	_, err = s.ctl.Write(append(line, '\n'))
	require.NoError(s.t, err)
	var r hookRun
	s.answer(&r)
	return r
}

type whoami struct {
	Identity  string `json:"identity"`
	ClaudePID *int   `json:"claudePid"`
	SessionID string `json:"sessionId"`
	PID       int    `json:"pid"`
}

func (s *session) whoami() whoami {
	s.t.Helper()
	s.nextID++
	s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall("bee_whoami", nil, nil))
	r := s.mcp.DecodeResult(s.mcp.Await(s.nextID, 10*time.Second))
	var w whoami
	require.NoError(s.t, json.Unmarshal(r.StructuredContent, &w))
	return w
}

func (s *session) runFile() string { return runfile.Path(s.runDir, s.claudePID) }

func TestClear_RetireChangesIdentity(t *testing.T) {
	s := start(t, "none")
	before := s.whoami()
	require.NotNil(t, before.ClaudePID)
	require.Equal(t, s.claudePID, *before.ClaudePID, "the bridge found its stand-in claude")
	require.Equal(t, s.bridgePID, before.PID)

	fi, err := os.Stat(s.runFile())
	require.NoError(t, err, "run file written")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(s.runDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	e, err := runfile.Read(s.runDir, s.claudePID)
	require.NoError(t, err)
	require.Equal(t, s.bridgePID, e.PID)

	r := s.hook(`{"session_id":"new-session","transcript_path":"/tmp/new-session.jsonl","cwd":"/","hook_event_name":"SessionStart","source":"clear"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout, "a SessionStart hook's stdout goes into the conversation")
	require.Contains(t, r.Stderr, before.Identity)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(r.Stderr), "\n")+1, "one stderr line: %q", r.Stderr)
	require.NotContains(t, r.Stderr, e.Token)

	after := s.whoami()
	require.NotEqual(t, before.Identity, after.Identity)
	require.Contains(t, r.Stderr, after.Identity)
	require.Equal(t, "new-session", after.SessionID)
	require.Equal(t, s.bridgePID, after.PID, "same bridge process")
}

func TestClear_StartupChangesNothing(t *testing.T) {
	s := start(t, "none")
	before := s.whoami()
	r := s.hook(`{"session_id":"s","hook_event_name":"SessionStart","source":"startup"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout)
	require.Empty(t, r.Stderr)
	require.Equal(t, before.Identity, s.whoami().Identity)
}

func TestClear_SIGTERMRemovesRunFile(t *testing.T) {
	s := start(t, "none")
	_, err := os.Stat(s.runFile())
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(s.bridgePID, syscall.SIGTERM))
	require.Eventually(t, func() bool {
		_, err := os.Stat(s.runFile())
		return os.IsNotExist(err)
	}, 5*time.Second, 5*time.Millisecond, "run file still there after SIGTERM")
	exit := s.bridgeExited(5 * time.Second)
	require.False(t, exit.Signaled, "killed by %s", exit.Signal)
	require.Equal(t, 0, exit.Code)
}

func TestClear_DeadBridgeReported(t *testing.T) {
	s := start(t, "none")
	e, err := runfile.Read(s.runDir, s.claudePID)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(s.bridgePID, syscall.SIGKILL))
	// Wait until the kernel has reaped it (the stand-in claude waits on it).
	require.Eventually(t, func() bool { return syscall.Kill(s.bridgePID, 0) != nil }, 5*time.Second, 5*time.Millisecond,
		"killed bridge still alive")
	_, err = os.Stat(s.runFile())
	require.NoError(t, err, "SIGKILL leaves the run file behind")

	r := s.hook(`{"session_id":"x","source":"clear"}`)
	require.Equal(t, 0, r.Exit)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, strconv.Itoa(e.PID))
	require.Contains(t, strings.ToLower(r.Stderr), "stale")
	require.Less(t, r.Took, 5*time.Second, "the hook is bounded")
	_, err = os.Stat(s.runFile())
	require.True(t, os.IsNotExist(err), "the stale run file is cleaned up")
}

// tool calls a tool on the session's bridge and returns its result.
func (s *session) tool(name string, args any) bridgetest.ToolResult {
	s.t.Helper()
	s.nextID++
	s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall(name, args, nil))
	return s.mcp.DecodeResult(s.mcp.Await(s.nextID, 70*time.Second))
}

// boardState opens the session's board file as another process would and
// returns the action's state and holder.
func (s *session) boardState(id string) (actions.State, string) {
	s.t.Helper()
	b, err := board.Open(s.board, nil)
	require.NoError(s.t, err)
	defer b.Close()
	r, err := b.Get(s.t.Context(), id)
	require.NoError(s.t, err)
	return r.State, r.Holder
}

func (s *session) postAndClaim() actions.Record {
	s.t.Helper()
	r := s.tool("bee_post_action", map[string]any{"title": "fix the build", "body": "it is red"})
	require.False(s.t, r.IsError, r.Text())
	r = s.tool("bee_wait_action", map[string]any{"timeoutSeconds": 10})
	require.False(s.t, r.IsError, r.Text())
	var page actions.Page
	require.NoError(s.t, json.Unmarshal(r.StructuredContent, &page))
	require.Len(s.t, page.Records, 1)
	return page.Records[0]
}

func TestClear_ClaimsGoBackToTheBoard(t *testing.T) {
	s := start(t, "board")
	before := s.whoami()
	rec := s.postAndClaim()
	require.Equal(t, before.Identity, rec.Holder)
	state, holder := s.boardState(rec.ID)
	require.Equal(t, actions.Claimed, state)
	require.Equal(t, before.Identity, holder)

	r := s.hook(`{"session_id":"after-clear","transcript_path":"/tmp/after-clear.jsonl","source":"clear"}`)
	require.Empty(t, r.Stdout)
	require.Contains(t, r.Stderr, before.Identity)

	state, holder = s.boardState(rec.ID)
	require.Equal(t, actions.Open, state, "the retired identity's claim is back on the board")
	require.Empty(t, holder)

	// The new identity can take it again.
	after := s.whoami()
	again := s.tool("bee_wait_action", map[string]any{"timeoutSeconds": 10})
	var page actions.Page
	require.NoError(t, json.Unmarshal(again.StructuredContent, &page))
	require.Len(t, page.Records, 1)
	require.Equal(t, rec.ID, page.Records[0].ID)
	require.Equal(t, after.Identity, page.Records[0].Holder)
}

// bridgeExited waits for the bridge to end and says how it did.
func (s *session) bridgeExited(d time.Duration) bridgeExit {
	s.t.Helper()
	var data []byte
	ended := assert.Eventually(s.t, func() bool {
		var err error
		data, err = os.ReadFile(s.exitFile)
		return err == nil
	}, d, 5*time.Millisecond)
	if !ended {
		s.t.Fatalf("bridge did not end within %v\nstderr:\n%s", d, s.mcp.Stderr())
	}
	var e bridgeExit
	require.NoError(s.t, json.Unmarshal(data, &e))
	return e
}

// TestBridge_CleanEndsWithAWaitInFlight ends a bridge that holds a claim
// and is waiting for more, each way it can end, and checks that it exits 0
// (not killed by a later signal), removes its run file and gives its claim
// back, exiting well inside the 500 ms between Claude Code's SIGINT and its
// SIGKILL. Closed stdin, which Claude Code never does first, also lets
// the answers still owed drain (250 ms) before the cleanup.
func TestBridge_CleanEndsWithAWaitInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(s *session)
		within time.Duration
	}{
		{"stdin closed", func(s *session) { s.mcp.CloseStdin() }, time.Second},
		{"SIGHUP", func(s *session) { syscall.Kill(s.bridgePID, syscall.SIGHUP) }, 400 * time.Millisecond},
		{"SIGINT then SIGTERM 100 ms later", func(s *session) {
			syscall.Kill(s.bridgePID, syscall.SIGINT)
			time.Sleep(100 * time.Millisecond)
			syscall.Kill(s.bridgePID, syscall.SIGTERM)
		}, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, "board")
			rec := s.postAndClaim()
			s.nextID++
			s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 60}, "in-flight"))
			s.awaitProgress(`"in-flight"`)
			ended := time.Now()
			tc.end(s)
			exit := s.bridgeExited(5 * time.Second)
			require.False(t, exit.Signaled, "killed by %s", exit.Signal)
			require.Equal(t, 0, exit.Code)
			_, err := os.Stat(s.runFile())
			require.True(t, os.IsNotExist(err), "run file removed")
			state, holder := s.boardState(rec.ID)
			require.Equal(t, actions.Open, state, "the departed identity's claim is back on the board")
			require.Empty(t, holder)
			require.Less(t, exit.At.Sub(ended), tc.within)
		})
	}
}

// awaitProgress waits for a progress notification for token (as JSON): the
// call that carries it is waiting.
func (s *session) awaitProgress(token string) {
	s.t.Helper()
	s.mcp.Find(10*time.Second, "progress for token "+token, func(m bridgetest.Message) bool {
		return m.Method == "notifications/progress" && strings.Contains(string(m.Params), `"progressToken":`+token)
	})
}

// TestBridge_SecondSignalDoesNotCutCleanupShort holds the board's write
// lock so that the departure is slow, and sends SIGTERM right after
// SIGINT: the bridge still finishes its bounded cleanup and exits 0.
func TestBridge_SecondSignalDoesNotCutCleanupShort(t *testing.T) {
	s := start(t, "board")
	s.postAndClaim()
	lock, err := os.OpenFile(s.board+"-lock", os.O_RDWR, 0)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	sent := time.Now()
	require.NoError(t, syscall.Kill(s.bridgePID, syscall.SIGINT))
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, syscall.Kill(s.bridgePID, syscall.SIGTERM))
	exit := s.bridgeExited(5 * time.Second)
	require.False(t, exit.Signaled, "killed by %s", exit.Signal)
	require.Equal(t, 0, exit.Code)
	_, err = os.Stat(s.runFile())
	require.True(t, os.IsNotExist(err), "the run file goes first, whatever the board does")
	// Its steps are bounded to 350 ms in all, which lifecycle's
	// TestRun_CleanupBoundedOnAStuckBoard holds to Claude Code's 500 ms;
	// here the bound has slack for a process's exit on a busy machine.
	require.Less(t, exit.At.Sub(sent), time.Second, "each cleanup step is bounded")
}

func TestBridge_EndsWhenRunFileTakenOver(t *testing.T) {
	t.Parallel()
	s := start(t, "board")
	rec := s.postAndClaim()
	// A newer bridge of the same Claude process launched as this one was
	// (a /mcp reconnect) writes its own run file; the old one, stdin still
	// open, must let go.
	newer := s.spawn(nil)
	exit := s.bridgeExited(10 * time.Second)
	require.Equal(t, 0, exit.Code)
	state, _ := s.boardState(rec.ID)
	require.Equal(t, actions.Open, state, "the abandoned bridge's claim is back on the board")
	e, err := runfile.Read(s.runDir, s.claudePID)
	require.NoError(t, err, "the newer bridge's run file survives the old one's end")
	require.Equal(t, newer, e.PID)
}

func TestBridge_EndsWhenClaudeIsGone(t *testing.T) {
	t.Parallel()
	s := start(t, "board")
	rec := s.postAndClaim()
	// Claude dies without a word; the bridge's stdin stays open (the test
	// holds it), so only the bridge's own check can end it.
	require.NoError(t, syscall.Kill(s.claudePID, syscall.SIGKILL))
	// Nobody is left to report its exit: it is gone (or a zombie) by then.
	require.Eventually(t, func() bool { return !liveness.Alive(s.bridgePID) }, 10*time.Second, 10*time.Millisecond,
		"the bridge ends when its claude is gone\nstderr:\n%s", s.mcp.Stderr())
	state, _ := s.boardState(rec.ID)
	require.Equal(t, actions.Open, state)
	_, err := os.Stat(s.runFile())
	require.True(t, os.IsNotExist(err), "run file removed")
}
