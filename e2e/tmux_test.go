//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Tmux is an interactive claude running in its own tmux server (a private
// socket under the test's temp dir), 200x50, so the test can type and read
// the screen like a person.
type Tmux struct {
	e    *Env
	sock string
	Pid  int // the claude process (the pane's process: the command is exec'd)
}

// StartTmux starts `exe args...` interactively in a detached tmux session.
func (e *Env) StartTmux(exe string, args ...string) *Tmux {
	e.t.Helper()
	return e.StartTmuxNamed("", exe, args...)
}

// StartTmuxNamed is StartTmux in a tmux server of its own, named name, so
// that one test can run several sessions side by side ("" is StartTmux's).
func (e *Env) StartTmuxNamed(name, exe string, args ...string) *Tmux {
	e.t.Helper()
	sock := "tmux.sock"
	if name != "" {
		sock = "tmux-" + name + ".sock"
	}
	return e.startTmux(sock, exe, append([]string{"--debug-file", e.DebugLog}, args...)...)
}

// startTmux starts `exe args...` in a detached tmux session of the server
// on socket sock (a name under the test's root).
func (e *Env) startTmux(sock, exe string, args ...string) *Tmux {
	e.t.Helper()
	x := &Tmux{e: e, sock: filepath.Join(e.Root, sock)}
	quoted := []string{"exec", shq(exe)}
	for _, a := range args {
		quoted = append(quoted, shq(a))
	}
	out, err := x.tmux("new-session", "-d", "-s", "bee", "-x", "200", "-y", "50", "-c", e.Project,
		strings.Join(quoted, " "), ";", "set-option", "-t", "bee", "remain-on-exit", "on")
	if err != nil {
		e.t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("---- tmux pane ----\n%s", x.Capture())
		}
		_, _ = x.tmux("kill-server")
	})
	pid, err := x.paneValue("#{pane_pid}")
	if err != nil {
		e.t.Fatalf("tmux pane pid: %v", err)
	}
	x.Pid, _ = strconv.Atoi(pid)
	return x
}

func (x *Tmux) tmux(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-S", x.sock}, args...)...)
	cmd.Env = x.e.Vars
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (x *Tmux) paneValue(format string) (string, error) {
	out, err := x.tmux("display-message", "-p", "-t", "bee", format)
	return strings.TrimSpace(out), err
}

// Capture returns the visible screen.
func (x *Tmux) Capture() string {
	out, err := x.tmux("capture-pane", "-p", "-t", "bee")
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
	}
	return out
}

// Type types text literally (no Enter).
func (x *Tmux) Type(text string) {
	x.e.t.Helper()
	if out, err := x.tmux("send-keys", "-t", "bee", "-l", text); err != nil {
		x.e.t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// Key sends named keys (Enter, Escape, ...).
func (x *Tmux) Key(keys ...string) {
	x.e.t.Helper()
	if out, err := x.tmux(append([]string{"send-keys", "-t", "bee"}, keys...)...); err != nil {
		x.e.t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// Submit types a line, waits for it to show, and presses Enter.
func (x *Tmux) Submit(text string) {
	x.e.t.Helper()
	x.Type(text)
	if !x.WaitScreen(10*time.Second, text) {
		x.e.t.Fatalf("typed %q but the screen does not show it", text)
	}
	time.Sleep(150 * time.Millisecond) // let the input settle before Enter
	x.Key("Enter")
}

// WaitScreen waits until the screen contains every substring.
func (x *Tmux) WaitScreen(timeout time.Duration, subs ...string) bool {
	return eventually(timeout, func() bool { return containsAll(x.Capture(), subs...) })
}

// WaitReady waits for the input prompt.
func (x *Tmux) WaitReady(timeout time.Duration) bool {
	return x.WaitScreen(timeout, "❯")
}

// Dead reports whether the claude process has ended.
func (x *Tmux) Dead() bool {
	v, err := x.paneValue("#{pane_dead}")
	return err != nil || v == "1"
}
