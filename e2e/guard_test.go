//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/hooks"
	"github.com/tractat-us/bee/runfile"
)

// The edit guard in the real Claude Code, headless: the hooks block that
// `bee-hook --print-config` prints (PreToolUse on the file tools, among
// the rest), Write and Edit allowed. No bee-mcp runs: this test process
// stands for the session's bridge, serving the real control channel with a
// PathChecker that holds src/auth/ for another identity, its run file
// keyed by the claude process. The model writes a held file (denied: the
// file is not written and the model reads bee's reason), a free file
// (written), and edits a held file that exists (denied again, unchanged).
func TestGuardDeniesAHeldEdit(t *testing.T) {
	e := NewEnv(t)
	held := filepath.Join(e.Project, "src", "auth")
	must(t, os.MkdirAll(held, 0o755))
	existing := filepath.Join(held, "session.go")
	must(t, os.WriteFile(existing, []byte("package auth\n"), 0o644))

	var asked []clearctl.CheckPathsRequest
	askedc := make(chan clearctl.CheckPathsRequest, 16)
	checker := clearctl.PathCheckerFunc(func(_ context.Context, req clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
		askedc <- req
		a := clearctl.CheckPathsAnswer{Allow: true}
		for _, p := range req.Paths {
			if strings.HasPrefix(p, held+"/") {
				a.Allow = false
				a.Conflicts = append(a.Conflicts, clearctl.PathConflict{
					Path: p, Holder: "agent:alice#0491068b", Pattern: "src/auth/**", Exclusive: true,
					Reason: "moving sessions to the store", Action: "a-12",
				})
			}
		}
		return a, nil
	})
	tok, err := runfile.NewToken()
	must(t, err)
	srv := clearctl.New(tok, clearctl.RetirerFunc(func(context.Context, clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		return clearctl.RetireResponse{}, errors.New("not in this test")
	}), &clearctl.Options{PathChecker: checker})
	must(t, srv.Start())
	t.Cleanup(func() { _ = srv.Close() })

	// The block --print-config prints, aimed at the wrapper that keeps
	// bee-hook's stderr.
	var settings map[string]any
	must(t, json.Unmarshal([]byte(hooks.ConfigFor(shq(filepath.Join(e.WrapDir, "bee-hook")))), &settings))
	settings["permissions"] = map[string]any{"allow": []string{"Read", "Write", "Edit"}}
	settingsPath := filepath.Join(e.Root, "settings.json")
	writeJSON(t, settingsPath, settings)

	ready := make(chan struct{})
	free := filepath.Join(e.Project, "docs", "guide.md")
	must(t, os.MkdirAll(filepath.Dir(free), 0o755))
	denied := filepath.Join(held, "login.go")
	e.API.Push(
		func(*APIRequest) Turn {
			<-ready // the run file names this process as the bridge
			return Turn{Tool: "Write", Input: map[string]any{"file_path": denied, "content": "package auth\n"}}
		},
		Call("Write", map[string]any{"file_path": free, "content": "# guide\n"}),
		Call("Read", map[string]any{"file_path": existing}), // Claude Code edits only what it has read
		Call("Edit", map[string]any{"file_path": existing, "old_string": "package auth", "new_string": "package auth // edited"}),
		Say("done"),
	)
	run := e.StartHeadless(claudeBin, "Write the files.", "--settings", settingsPath)
	must(t, runfile.Write(e.RunDir, run.Cmd.Process.Pid, runfile.Entry{Port: srv.Port(), Token: tok, PID: os.Getpid()}))
	close(ready)

	writeReq := e.MustToolCall("Write", 1, 60*time.Second)
	_, tr := e.ToolResult(writeReq, 30*time.Second)
	t.Logf("denied Write's result: %q (is_error %v)", tr.Text, tr.IsError)
	if !tr.IsError || !strings.Contains(tr.Text, `bee: src/auth/login.go is reserved by agent:alice#0491068b for a-12 ("moving sessions to the store"`) ||
		!strings.Contains(tr.Text, "take other work, or post to the holder") {
		t.Errorf("the held Write's result = %q (is_error %v), want an error holding bee's reason", tr.Text, tr.IsError)
	}
	if _, err := os.Stat(denied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied Write wrote %s (stat: %v)", denied, err)
	}

	freeReq := e.MustToolCall("Write", 2, 30*time.Second)
	_, tr = e.ToolResult(freeReq, 30*time.Second)
	if tr.IsError {
		t.Errorf("the free Write failed: %q", tr.Text)
	}
	if got := readFile(free); got != "# guide\n" {
		t.Errorf("%s holds %q, want the free Write's content", free, got)
	}

	editReq := e.MustToolCall("Edit", 1, 30*time.Second)
	_, tr = e.ToolResult(editReq, 30*time.Second)
	if !tr.IsError || !strings.Contains(tr.Text, "bee: src/auth/session.go is reserved by agent:alice#0491068b") {
		t.Errorf("the held Edit's result = %q (is_error %v), want bee's reason", tr.Text, tr.IsError)
	}
	if got := readFile(existing); got != "package auth\n" {
		t.Errorf("the denied Edit changed %s: %q", existing, got)
	}

	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	close(askedc)
	for req := range askedc {
		asked = append(asked, req)
	}
	want := []string{denied, free, existing}
	if len(asked) != len(want) {
		t.Fatalf("the bridge was asked %d times (%+v), want once per edit", len(asked), asked)
	}
	for i, req := range asked {
		if len(req.Paths) != 1 || req.Paths[0] != want[i] || req.Cwd != e.Project {
			t.Errorf("ask %d = %+v, want path %s from cwd %s", i, req, want[i], e.Project)
		}
	}
	if log := readFile(e.HookLog); strings.Contains(log, "allowed unchecked") {
		t.Errorf("bee-hook let an edit through unchecked:\n%s", log)
	}
}
