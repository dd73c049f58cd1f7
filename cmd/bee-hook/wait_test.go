package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

// waiterProc is bee-hook --wait-for-work running as its own process (the
// test binary as bee-hook), aimed at a bridge this test serves: the test
// process stands for both the claude process and the bridge.
type waiterProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
}

// bridgeFor serves the control channel with waker, registered for this
// process as its claude, and returns the run directory.
func bridgeFor(t *testing.T, waker clearctl.Waker, token string) string {
	t.Helper()
	srv := clearctl.New(token, clearctl.RetirerFunc(func(context.Context, clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		return clearctl.RetireResponse{}, nil
	}), &clearctl.Options{Waker: waker})
	require.NoError(t, srv.Start())
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, runfile.Write(dir, os.Getpid(), runfile.Entry{Port: srv.Port(), Token: token, PID: os.Getpid()}))
	return dir
}

// startWaiter runs the waiter with attended as CLAUDE_CODE_SESSION_ATTENDED
// ("" leaves it unset).
func startWaiter(t *testing.T, runDir, attended string, extra ...string) *waiterProc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	args := append([]string{"--wait-for-work", "--claude-pid", strconv.Itoa(os.Getpid()), "--run-dir", runDir, "--bridge-within", "300ms"}, extra...)
	cmd := exec.Command(exe, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDE") && !strings.HasPrefix(kv, "BEE_") {
			env = append(env, kv)
		}
	}
	env = append(env, runAsEnv+"=bee-hook", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	if attended != "" {
		env = append(env, "CLAUDE_CODE_SESSION_ATTENDED="+attended)
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(`{"session_id":"s-1","hook_event_name":"Stop","stop_hook_active":true}`)
	w := &waiterProc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &w.stdout, &w.stderr
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
	})
	return w
}

// exit waits for the waiter to end (within d, stretched by
// testtime.Factor) and returns its exit status.
func (w *waiterProc) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	d = testtime.Bound(d)
	select {
	case <-w.done:
	case <-time.After(d):
		t.Fatalf("the waiter did not end within %v; stderr: %s", d, w.stderr.String())
	}
	require.Empty(t, w.stdout.String(), "a hook writes nothing to stdout")
	return w.cmd.ProcessState.ExitCode()
}

func answering(resp clearctl.WaitResponse) clearctl.Waker {
	return clearctl.WakerFunc(func(context.Context, clearctl.WaitRequest) clearctl.WaitResponse { return resp })
}

func TestBeeHook_WaiterExitCodes(t *testing.T) {
	t.Parallel()
	token, err := runfile.NewToken()
	require.NoError(t, err)
	wake := clearctl.WaitResponse{Wake: true, Line: `bee: action a-1 "t" from user:alice is waiting for agent:x#00000001; call bee_wait_action to take it.`}
	for _, tc := range []struct {
		name     string
		waker    clearctl.Waker
		attended string
		token    string // the run file's token; "" means the bridge's
		noFile   bool
		code     int
		stderr   string // a prefix
	}{
		{name: "not attended", waker: answering(wake), attended: "", code: 0, stderr: ""},
		{name: "claude -p", waker: answering(wake), attended: "0", code: 0, stderr: ""},
		{name: "wake", waker: answering(wake), attended: "1", code: 2, stderr: wake.Line + "\n"},
		{name: "superseded", waker: answering(clearctl.WaitResponse{Reason: clearctl.ReasonSuperseded}), attended: "1", code: 0,
			stderr: "bee-hook: waiter ends without a wake: superseded\n"},
		{name: "bridge panics", waker: clearctl.WakerFunc(func(context.Context, clearctl.WaitRequest) clearctl.WaitResponse { panic("boom") }),
			attended: "1", code: 0, stderr: "bee-hook: waiter ends without a wake: bridge error\n"},
		{name: "wrong token", waker: answering(wake), attended: "1", token: "not-the-token", code: 0,
			stderr: "bee-hook: the bridge of claude pid"},
		{name: "no bridge", waker: answering(wake), attended: "1", noFile: true, code: 0,
			stderr: "bee-hook: no bridge registered for claude pid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bridgeFor(t, tc.waker, token)
			if tc.token != "" {
				e, err := runfile.Read(dir, os.Getpid())
				require.NoError(t, err)
				e.Token = tc.token
				require.NoError(t, runfile.Write(dir, os.Getpid(), e))
			}
			if tc.noFile {
				require.NoError(t, os.Remove(runfile.Path(dir, os.Getpid())))
			}
			w := startWaiter(t, dir, tc.attended)
			require.Equal(t, tc.code, w.exit(t, 10*time.Second), "stderr: %s", w.stderr.String())
			require.True(t, strings.HasPrefix(w.stderr.String(), tc.stderr), "stderr %q", w.stderr.String())
			require.LessOrEqual(t, strings.Count(w.stderr.String(), "\n"), 1, "one line at most")
			require.NotContains(t, w.stderr.String(), token)
		})
	}
}

// SIGTERM, as Claude Code sends every waiter at /exit, ends a waiting
// waiter at once, with 0.
func TestBeeHook_WaiterEndsOnSIGTERM(t *testing.T) {
	t.Parallel()
	token, err := runfile.NewToken()
	require.NoError(t, err)
	arrived := make(chan struct{}, 1)
	dir := bridgeFor(t, clearctl.WakerFunc(func(ctx context.Context, _ clearctl.WaitRequest) clearctl.WaitResponse {
		arrived <- struct{}{}
		<-ctx.Done()
		return clearctl.WaitResponse{Reason: "gone"}
	}), token)
	w := startWaiter(t, dir, "1")
	select {
	case <-arrived:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatalf("the waiter never registered; stderr: %s", w.stderr.String())
	}
	start := time.Now()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, w.exit(t, 5*time.Second))
	require.Less(t, time.Since(start), testtime.Bound(2*time.Second), "at once")
	require.True(t, strings.HasPrefix(w.stderr.String(), "bee-hook: waiter stopped"), w.stderr.String())
}
