//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pluginReserve = pluginPrefix + "__bee_reserve_paths"

// Reservations in the real Claude Code: two sessions of the plugin in one
// repository, with nothing of bee on PATH (the plugin's launchers find the
// commands in ~/go/bin), so the plugin alone carries the bridge and the
// edit guard. Session A (interactive) reserves src/auth/** through its
// model's bee_reserve_paths call. Session B (headless) is one conversation
// whose model tries to Edit a file there: the call is denied, the model
// reads A's identity and reason, the file is unchanged; B writes elsewhere
// freely. A /clears: its identity departs with its reservation, and B's
// next Edit there goes through. A, under its new identity, reserves again;
// B's Edit is denied naming the new holder; A /exits, and B's next Edit
// goes through: a reservation lives exactly as long as its holder.
//
// One fake model serves both sessions; they never make requests at the
// same time (B's next model turn waits, in a gate, for what A does), so the
// script is pushed in the order the requests come.
func TestReservationsTwoSessions(t *testing.T) {
	e := NewEnv(t)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", e.Project}, args...)...)
		cmd.Env = append(e.Vars, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	git("remote", "add", "origin", "git@github.com:tractat-us/e2e-reservations.git")
	const repoName = "github.com/tractat-us/e2e-reservations"
	login := filepath.Join(e.Project, "src", "auth", "login.go")
	must(t, os.MkdirAll(filepath.Dir(login), 0o755))
	must(t, os.WriteFile(login, []byte("package auth\n"), 0o644))
	guide := filepath.Join(e.Project, "docs", "guide.md")
	must(t, os.MkdirAll(filepath.Dir(guide), 0o755))

	e.OnlyInGoBin(true)
	settings := filepath.Join(e.Root, "settings.json")
	writeJSON(t, settings, map[string]any{"permissions": map[string]any{"allow": []string{pluginPrefix, "Read", "Write", "Edit"}}})

	a := e.StartTmuxNamed("a", claudeBin, "--plugin-dir", repoRoot, "--settings", settings)
	if !a.WaitReady(60 * time.Second) {
		t.Fatal("session A never showed its prompt")
	}
	// reserve has A's model reserve src/auth/** when prompted, and checks
	// what it got.
	reserve := func(n int, prompt, reason string) string {
		t.Helper()
		done := fmt.Sprintf("a-reserved-%d", n)
		e.API.Push(Call(pluginReserve, map[string]any{"paths": []string{"src/auth/**"}, "reason": reason}), Say(done))
		a.Submit(prompt)
		holder := e.reservedBy(n, reason, repoName)
		if !a.WaitScreen(30*time.Second, done) {
			t.Fatalf("A's turn %d did not finish on screen", n)
		}
		return holder
	}
	// reservations is `bee reservations --json`, run in the project.
	reservations := func() []struct{ Holder, Reason string } {
		t.Helper()
		var rs []struct{ Holder, Reason string }
		must(t, json.Unmarshal([]byte(e.Bee("reservations", "--json")), &rs))
		return rs
	}
	// gate is a model turn of B's that waits for open, then edits.
	gate := func(open <-chan struct{}, edit map[string]any) Step {
		return func(*APIRequest) Turn {
			select {
			case <-open:
				return Turn{Tool: "Edit", Input: edit}
			case <-t.Context().Done():
				return Turn{Text: "(the test is over)"}
			}
		}
	}
	editTo := func(from, to string) map[string]any {
		return map[string]any{"file_path": login, "old_string": from, "new_string": to}
	}

	const reason1 = "moving sessions to the store"
	holder1 := reserve(1, "Reserve the auth code before you change it.", reason1)
	if rs := reservations(); len(rs) != 1 || rs[0].Holder != holder1 {
		t.Fatalf("bee reservations in the project shows %+v, want A's one", rs)
	}

	// B is denied, works elsewhere, and waits (in the fake model) for A.
	cleared, heldAgain, exited := make(chan struct{}), make(chan struct{}), make(chan struct{})
	e.API.Push(
		Call("Read", map[string]any{"file_path": login}), // Claude Code edits only what it has read
		Call("Edit", editTo("package auth", "package auth // by B")),
		Call("Write", map[string]any{"file_path": guide, "content": "# guide\n"}),
		gate(cleared, editTo("package auth", "package auth // by B")),
		gate(heldAgain, editTo("// by B", "// by B, twice")),
	)
	b := e.StartHeadless(claudeBin, "Edit the login code.", "--plugin-dir", repoRoot, "--settings", settings)
	e.expectDenied(1, login, "package auth\n", holder1, reason1)
	_, tr := e.ToolResult(e.MustToolCall("Write", 1, 30*time.Second), 30*time.Second)
	if tr.IsError || readFile(guide) != "# guide\n" {
		t.Errorf("B's Write of a free file: %q (is_error %v); the file holds %q", tr.Text, tr.IsError, readFile(guide))
	}

	// A clears: its identity departs, and its reservation with it.
	logOff := len(e.BridgeLogText())
	a.Submit("/clear")
	clearAt := time.Now()
	line, seenAt, ok := e.WaitBridgeLog(logOff, 20*time.Second, "retired")
	if !ok {
		t.Fatal("A's bridge logged no retire within 20 s of /clear")
	}
	rs := reservations()
	t.Logf("A's /clear -> bridge %q after %v; bee reservations then: %+v (%v after /clear)",
		strings.TrimSpace(line), seenAt.Sub(clearAt).Round(time.Millisecond), rs, time.Since(clearAt).Round(time.Millisecond))
	if len(rs) != 0 {
		t.Errorf("after A's /clear bee reservations shows %+v, want none", rs)
	}
	close(cleared)
	e.expectEdited(2, login, "package auth // by B\n", "A's /clear")

	// A, a new identity now, holds the paths again; B is denied again.
	if !eventually(30*time.Second, func() bool { return e.API.Pending() == 0 }) {
		t.Fatal("B's model did not come back for its next turn after its Edit")
	}
	const reason2 = "splitting login from sessions"
	holder2 := reserve(2, "Reserve the auth code again.", reason2)
	if holder2 == holder1 {
		t.Errorf("A's identity did not change across /clear: %s", holder2)
	}
	e.API.Push(gate(exited, editTo("// by B", "// by B, after A left")), Say("b-done"))
	close(heldAgain)
	e.expectDenied(3, login, "package auth // by B\n", holder2, reason2)

	// A exits: its reservation ends with it.
	a.Submit("/exit")
	exitAt := time.Now()
	if !eventually(15*time.Second, a.Dead) {
		t.Fatal("A did not exit after /exit")
	}
	deadAt := time.Now()
	rs = reservations()
	t.Logf("A's /exit -> claude gone after %v; bee reservations then: %+v", deadAt.Sub(exitAt).Round(time.Millisecond), rs)
	if len(rs) != 0 {
		t.Errorf("after A's /exit bee reservations shows %+v, want none", rs)
	}
	close(exited)
	e.expectEdited(4, login, "package auth // by B, after A left\n", "A's /exit")

	if err := b.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p (B): %v", err)
	}
	if !strings.Contains(b.Stdout.String(), "b-done") {
		t.Errorf("B printed %q", b.Stdout.String())
	}
	if log := readFile(e.HookLog); strings.Contains(log, "allowed unchecked") {
		t.Errorf("bee-hook let an edit through unchecked:\n%s", log)
	}
	var guards []string
	for _, line := range e.DebugLines("PreToolUse:") {
		if strings.Contains(line, "--guard") && strings.Contains(line, "finished with status") {
			guards = append(guards, line)
		}
	}
	t.Logf("the plugin's guard, as claude timed it:\n%s", strings.Join(guards, "\n"))
	expectCleanEnd(t, e)
}

// reservedBy waits for the n-th bee_reserve_paths call (the plugin's) and
// its result, checks that it reserved src/auth/** in repo with reason, and
// returns the holder.
func (e *Env) reservedBy(n int, reason, repo string) string {
	e.t.Helper()
	_, tr := e.ToolResult(e.MustToolCall(pluginReserve, n, 60*time.Second), 30*time.Second)
	var out struct {
		Reservation struct {
			Holder   string   `json:"holder"`
			Repo     string   `json:"repo"`
			Patterns []string `json:"patterns"`
			Reason   string   `json:"reason"`
		} `json:"reservation"`
		Next string `json:"next"`
	}
	if !parseResult(e.t, "bee_reserve_paths", tr, &out) {
		e.t.FailNow()
	}
	r := out.Reservation
	e.t.Logf("A reserved %v in %s as %s; the model reads next: %q", r.Patterns, r.Repo, r.Holder, out.Next)
	if !identityRE.MatchString(r.Holder) || r.Repo != repo || r.Reason != reason ||
		len(r.Patterns) != 1 || r.Patterns[0] != "src/auth/**" {
		e.t.Fatalf("the reservation is %+v, want src/auth/** in %s for %q", r, repo, reason)
	}
	return r.Holder
}

// expectDenied checks the n-th Edit of file: refused with an error result
// naming holder and reason, as the model reads it, the file still holding
// want.
func (e *Env) expectDenied(n int, file, want, holder, reason string) {
	e.t.Helper()
	req := e.MustToolCall("Edit", n, 90*time.Second)
	next, tr := e.ToolResult(req, 30*time.Second)
	e.t.Logf("B's Edit #%d, as the model reads it %v after the call: %q (is_error %v)",
		n, next.At.Sub(req.Answered).Round(time.Millisecond), tr.Text, tr.IsError)
	rel, err := filepath.Rel(e.Project, file)
	must(e.t, err)
	if !tr.IsError || !strings.HasPrefix(tr.Text, "PreToolUse:Edit hook error") ||
		!strings.Contains(tr.Text, "bee: "+rel+" is reserved by "+holder+` ("`+reason+`"`) ||
		!strings.Contains(tr.Text, "take other work, or post to the holder") {
		e.t.Errorf("B's Edit #%d of a held file = %q (is_error %v), want a denial naming %s and %q", n, tr.Text, tr.IsError, holder, reason)
	}
	if got := readFile(file); got != want {
		e.t.Errorf("the denied Edit #%d changed %s to %q", n, file, got)
	}
}

// expectEdited checks the n-th Edit of file went through after what freed
// it: file now holds want.
func (e *Env) expectEdited(n int, file, want, after string) {
	e.t.Helper()
	req := e.MustToolCall("Edit", n, 30*time.Second)
	next, tr := e.ToolResult(req, 30*time.Second)
	e.t.Logf("B's Edit #%d after %s: %q (is_error %v) %v after the call",
		n, after, tr.Text, tr.IsError, next.At.Sub(req.Answered).Round(time.Millisecond))
	if tr.IsError {
		e.t.Errorf("B's Edit #%d after %s was refused: %q", n, after, tr.Text)
	}
	if got := readFile(file); got != want {
		e.t.Errorf("after %s, B's Edit #%d left %s holding %q, want %q", after, n, file, got, want)
	}
}
