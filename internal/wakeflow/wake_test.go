// Package wakeflow tests wake on work across real processes: a stand-in
// claude (the test binary under that name) spawns the real bee-mcp as its
// direct child and runs the real bee-hook --wait-for-work the way Claude
// Code runs an asyncRewake hook (/bin/sh -c, in its own process group, in
// the background), while the test posts on the same board file as a person
// would.
package wakeflow

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/bridgetest"
	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/internal/testtime"
)

// bin holds the binaries built for this package's tests.
var bin string

func TestMain(m *testing.M) { bridgetest.Main(m, &bin, standInClaude) }

// A command is one line the test sends the stand-in claude on fd 3.
type command struct {
	Op      string // "hook", "signal" or "reconnect"
	ID      string // the hook's name, for hook and signal
	Command string // hook: run by /bin/sh -c
	Input   string // hook: its stdin
	Signal  int    // signal: sent to the hook's process group
}

// An event is one line the stand-in claude sends back on fd 4.
type event struct {
	Event  string // "bridge", "bridge-exited", "started" or "exited"
	ID     string `json:",omitempty"`
	PID    int    `json:",omitempty"`
	Exit   int    `json:",omitempty"`
	Stdout string `json:",omitempty"`
	Stderr string `json:",omitempty"`
	At     time.Time
}

// standInClaude is the claude process: bee-mcp is its direct child and
// shares its stdin and stdout (the test talks MCP through them). Hooks run
// in the background, as asyncRewake hooks do; "reconnect" replaces the
// bridge with a new one, as /mcp does.
func standInClaude(si bridgetest.StandIn) int {
	ctl := os.NewFile(3, "control")
	answers := os.NewFile(4, "answers")
	var mu sync.Mutex
	enc := json.NewEncoder(answers)
	send := func(e event) {
		mu.Lock()
		defer mu.Unlock()
		e.At = time.Now()
		enc.Encode(e)
	}
	var bridges sync.WaitGroup
	startBridge := func(stdin io.Reader, stdout io.Writer) *exec.Cmd {
		b := exec.Command(filepath.Join(si.Bin, "bee-mcp"), "--agent", "waketest")
		b.Stdin, b.Stdout, b.Stderr = stdin, stdout, os.Stderr
		if err := b.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "stand-in claude:", err)
			os.Exit(1)
		}
		bridges.Go(func() { // reaped at once, as Claude Code does
			b.Wait()
			send(event{Event: "bridge-exited", PID: b.Process.Pid, Exit: b.ProcessState.ExitCode()})
		})
		send(event{Event: "bridge", PID: b.Process.Pid})
		return b
	}
	bridge := startBridge(os.Stdin, os.Stdout)
	var held []*os.File // stdins of replacement bridges, held open

	hooks := map[string]*exec.Cmd{}
	var running sync.WaitGroup
	sc := bufio.NewScanner(ctl)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "stand-in claude: bad command:", err)
			continue
		}
		switch c.Op {
		case "hook":
			h := exec.Command("/bin/sh", "-c", c.Command)
			h.Stdin = strings.NewReader(c.Input)
			h.Env = append(os.Environ(), "CLAUDE_CODE_SESSION_ATTENDED=1", "CLAUDE_PID="+strconv.Itoa(os.Getpid()))
			h.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var stdout, stderr bytes.Buffer
			h.Stdout, h.Stderr = &stdout, &stderr
			if err := h.Start(); err != nil {
				send(event{Event: "exited", ID: c.ID, Exit: -1, Stderr: err.Error()})
				continue
			}
			hooks[c.ID] = h
			send(event{Event: "started", ID: c.ID, PID: h.Process.Pid})
			running.Go(func() {
				h.Wait()
				send(event{Event: "exited", ID: c.ID, Exit: h.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()})
			})
		case "signal":
			if h := hooks[c.ID]; h != nil {
				syscall.Kill(-h.Process.Pid, syscall.Signal(c.Signal))
			}
		case "reconnect":
			// /mcp: the old bridge is told to end, a new one starts (with a
			// stdin of its own, held open: nobody speaks MCP to it here).
			bridge.Process.Signal(syscall.SIGTERM)
			r, w, err := os.Pipe()
			if err != nil {
				fmt.Fprintln(os.Stderr, "stand-in claude:", err)
				return 1
			}
			held = append(held, w)
			bridge = startBridge(r, io.Discard)
		}
	}
	// The test is done: end what is left, as /exit does.
	for _, h := range hooks {
		syscall.Kill(-h.Process.Pid, syscall.SIGTERM)
	}
	running.Wait()
	bridge.Process.Signal(syscall.SIGTERM)
	for _, w := range held {
		w.Close()
	}
	bridges.Wait()
	return 0
}

// session is one stand-in claude with its bridge.
type session struct {
	t         testing.TB
	claudePID int
	bridgePID int // the first bridge
	runDir    string
	board     string
	mcp       *bridgetest.Proc
	ctl       io.WriteCloser

	mu      sync.Mutex
	events  []event
	changed chan struct{}
	nextID  int
}

func start(t testing.TB, env ...string) *session {
	t.Helper()
	testbin.SkipShort(t) // bin is empty under -short
	dir := t.TempDir()
	s := &session{t: t, runDir: filepath.Join(dir, "run"), board: filepath.Join(dir, "board.db"), changed: make(chan struct{})}
	ctlR, ctlW, err := os.Pipe()
	require.NoError(t, err)
	ansR, ansW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "claude"))
	cmd.Env = append(os.Environ(),
		bridgetest.StandIn{Bin: bin}.Env(),
		"BEE_RUN_DIR="+s.runDir, "BEE_BOARD="+s.board, "BEE_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, env...)
	cmd.ExtraFiles = []*os.File{ctlR, ansW}
	s.mcp = bridgetest.Start(t, cmd)
	ctlR.Close()
	ansW.Close()
	s.ctl = ctlW
	go func() {
		dec := json.NewDecoder(ansR)
		for {
			var e event
			if dec.Decode(&e) != nil {
				return
			}
			s.mu.Lock()
			s.events = append(s.events, e)
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ctlW.Close() // the stand-in ends its hooks and bridges, then exits
		select {
		case <-s.mcp.Exited():
		case <-time.After(testtime.Bound(10 * time.Second)):
			t.Errorf("the stand-in claude did not end within 10 s")
		}
		ansR.Close()
	})
	s.claudePID = cmd.Process.Pid
	s.bridgePID = s.await(func(e event) bool { return e.Event == "bridge" }, 10*time.Second).PID
	s.mcp.Initialize()
	return s
}

// send sends the stand-in a command.
func (s *session) send(c command) {
	s.t.Helper()
	line, err := json.Marshal(c)
	require.NoError(s.t, err)
	_, err = s.ctl.Write(append(line, '\n'))
	require.NoError(s.t, err)
}

// await returns the first event that matches, waiting up to d (a bound,
// stretched by testtime.Factor).
func (s *session) await(match func(event) bool, d time.Duration) event {
	s.t.Helper()
	d = testtime.Bound(d)
	deadline := time.After(d)
	for {
		s.mu.Lock()
		for _, e := range s.events {
			if match(e) {
				s.mu.Unlock()
				return e
			}
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			s.t.Fatalf("no matching event within %v; events %+v\nbridge stderr:\n%s", d, s.eventsNow(), s.mcp.Stderr())
		}
	}
}

func (s *session) eventsNow() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.events...)
}

// exited returns the hook's exit, if it has exited.
func (s *session) exited(id string) (event, bool) {
	for _, e := range s.eventsNow() {
		if e.Event == "exited" && e.ID == id {
			return e, true
		}
	}
	return event{}, false
}

const stopInput = `{"session_id":"s-1","transcript_path":"/t/s-1.jsonl","cwd":"/","hook_event_name":"Stop","stop_hook_active":true}`

// waiter starts bee-hook --wait-for-work in the background, as Claude Code
// starts an asyncRewake hook at Stop.
func (s *session) waiter(id string, flags ...string) {
	s.t.Helper()
	// exec, so that the exit status the stand-in sees is bee-hook's own
	// (dash keeps the shell of a plain command, which a SIGTERM to the
	// process group kills too).
	cmd := "exec " + filepath.Join(bin, "bee-hook") + " --wait-for-work " + strings.Join(flags, " ")
	s.send(command{Op: "hook", ID: id, Command: cmd, Input: stopInput})
	s.await(func(e event) bool { return e.Event == "started" && e.ID == id }, 10*time.Second)
}

// hookExit waits for the hook to exit and returns how.
func (s *session) hookExit(id string, d time.Duration) event {
	s.t.Helper()
	return s.await(func(e event) bool { return e.Event == "exited" && e.ID == id }, d)
}

// openBoard opens the session's board as another process would.
func (s *session) openBoard() *board.Board {
	s.t.Helper()
	var b *board.Board
	require.Eventually(s.t, func() bool {
		var err error
		b, err = board.Open(s.board, nil)
		return err == nil
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "the bridge creates the board")
	s.t.Cleanup(func() { b.Close() })
	return b
}

// armedAs waits until the board shows a waiter armed and returns for whom.
func (s *session) armedAs(b *board.Board) identity.ID {
	s.t.Helper()
	var who identity.ID
	require.Eventually(s.t, func() bool {
		ms, err := b.Members(s.t.Context())
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.WaiterSince != nil {
				who = m.ID
				return true
			}
		}
		return false
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "a waiter is armed")
	return who
}

func (s *session) tool(name string, args any) bridgetest.ToolResult {
	s.t.Helper()
	s.nextID++
	s.mcp.Call(s.nextID, "tools/call", bridgetest.ToolCall(name, args, nil))
	return s.mcp.DecodeResult(s.mcp.Await(s.nextID, 70*time.Second))
}

// A post wakes the waiter: exit 2, one stderr line naming the action and
// the identity it is claimed for, nothing on stdout; the woken model's
// bee_wait_action gets that claim at once.
func TestWake_PostWakesTheWaiter(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := s.openBoard()
	s.waiter("w1")
	who := s.armedAs(b)
	rec, err := b.Post(t.Context(), "user:alice", actions.Draft{To: "waketest", Title: "Fix the flaky test", Body: "it fails one run in ten"})
	require.NoError(t, err)
	e := s.hookExit("w1", 10*time.Second)
	require.Equal(t, 2, e.Exit, "stderr: %s", e.Stderr)
	require.Empty(t, e.Stdout)
	require.Equal(t, `bee: action `+rec.ID+` "Fix the flaky test" from user:alice is waiting for `+string(who)+"; call bee_wait_action to take it.\n", e.Stderr)

	start := time.Now()
	r := s.tool("bee_wait_action", map[string]any{"timeoutSeconds": 30})
	require.False(t, r.IsError, r.Text())
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "the claim made for the wake comes back at once")
	var page actions.Page
	require.NoError(t, json.Unmarshal(r.StructuredContent, &page))
	require.Len(t, page.Records, 1)
	require.Equal(t, rec.ID, page.Records[0].ID)
	require.Equal(t, string(who), page.Records[0].Holder)
}

// A newer waiter supersedes the older, which exits 0; SIGTERM ends the
// newer at once, with 0; the bridge says the session has no waiter then.
func TestWake_SupersedeAndSIGTERM(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := s.openBoard()
	s.waiter("w1")
	who := s.armedAs(b)
	s.waiter("w2")
	e := s.hookExit("w1", 10*time.Second)
	require.Equal(t, 0, e.Exit)
	require.Equal(t, "bee-hook: waiter ends without a wake: superseded\n", e.Stderr)
	_, gone := s.exited("w2")
	require.False(t, gone, "the newer waiter is still armed")

	sent := time.Now()
	s.send(command{Op: "signal", ID: "w2", Signal: int(syscall.SIGTERM)})
	e = s.hookExit("w2", 5*time.Second)
	require.Equal(t, 0, e.Exit)
	require.Less(t, e.At.Sub(sent), testtime.Bound(2*time.Second), "SIGTERM ends the waiter at once")
	require.Eventually(t, func() bool {
		ms, err := b.Members(t.Context())
		return err == nil && len(ms) == 1 && ms[0].ID == who && ms[0].WaiterSince == nil
	}, testtime.Bound(5*time.Second), 10*time.Millisecond, "bee agents shows the waiter gone")
}

// A claim made for a wake that no bee_wait_action takes goes back to the
// board within the bound, and that action does not wake the session again.
func TestWake_HandoverBound(t *testing.T) {
	t.Parallel()
	s := start(t, "BEE_HANDOVER_WITHIN=300ms")
	b := s.openBoard()
	s.waiter("w1")
	s.armedAs(b)
	rec, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "nobody takes this"})
	require.NoError(t, err)
	require.Equal(t, 2, s.hookExit("w1", 10*time.Second).Exit)
	require.Eventually(t, func() bool {
		r, err := b.Get(t.Context(), rec.ID)
		return err == nil && r.State == actions.Open
	}, testtime.Bound(10*time.Second), 10*time.Millisecond, "the claim goes back")

	s.waiter("w2")
	s.armedAs(b)
	other, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "this one wakes it"})
	require.NoError(t, err)
	e := s.hookExit("w2", 10*time.Second)
	require.Equal(t, 2, e.Exit)
	require.Contains(t, e.Stderr, "action "+other.ID+" ")
	require.NotContains(t, e.Stderr, "action "+rec.ID+" ")
}

// A /mcp reconnect: the bridge the waiter waits on ends ("shutting down")
// and a new one starts; the waiter registers with the new one, and a post
// wakes it under the new bridge's identity.
func TestWake_FollowsAReconnect(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := s.openBoard()
	s.waiter("w1")
	old := s.armedAs(b)
	s.send(command{Op: "reconnect"})
	var fresh identity.ID
	require.Eventually(t, func() bool {
		ms, err := b.Members(t.Context())
		if err != nil || len(ms) != 1 || ms[0].ID == old || ms[0].WaiterSince == nil {
			return false
		}
		fresh = ms[0].ID
		return true
	}, testtime.Bound(20*time.Second), 20*time.Millisecond, "the waiter armed with the new bridge")
	_, gone := s.exited("w1")
	require.False(t, gone, "the waiter followed the new bridge")
	rec, err := b.Post(t.Context(), "user:alice", actions.Draft{To: "waketest", Title: "after the reconnect"})
	require.NoError(t, err)
	e := s.hookExit("w1", 10*time.Second)
	require.Equal(t, 2, e.Exit, "stderr: %s", e.Stderr)
	require.Contains(t, e.Stderr, "action "+rec.ID+" ")
	require.Contains(t, e.Stderr, "waiting for "+string(fresh))
}

// The bridge ends with no successor (the session is ending): the waiter
// exits 0 within its bound, without a wake.
func TestWake_BridgeGoneWaiterEnds(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := s.openBoard()
	s.waiter("w1", "--bridge-within", "500ms")
	s.armedAs(b)
	ends := time.Now()
	require.NoError(t, syscall.Kill(s.bridgePID, syscall.SIGTERM))
	e := s.hookExit("w1", 10*time.Second)
	require.Equal(t, 0, e.Exit)
	require.Empty(t, e.Stdout)
	require.Contains(t, e.Stderr, "went away and no new one registered after 500ms")
	require.Less(t, e.At.Sub(ends), testtime.Bound(5*time.Second))

	// Answering the waiter does not slow the bridge's exit, which must come
	// well before Claude Code's SIGKILL (500 ms after its SIGINT); the
	// bound has slack for a busy machine, as clearflow's has.
	exit := s.await(func(e event) bool { return e.Event == "bridge-exited" && e.PID == s.bridgePID }, 5*time.Second)
	require.Equal(t, 0, exit.Exit)
	require.Less(t, exit.At.Sub(ends), testtime.Bound(400*time.Millisecond), "exit with a waiter armed")
}
