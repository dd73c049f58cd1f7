//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Wake on work through the real Claude Code: bee-hook --wait-for-work is an
// asyncRewake hook on Stop and SessionStart, configured exactly as
// `bee-hook --print-config` prints it, and a post wakes an idle session with
// nobody typing.

// WriteWakeSettings writes a settings file for `claude --settings`: bee's
// tools allowed, and the hooks block `bee-hook --print-config` prints (the
// /clear hook and the waiter, naming the built bee-hook by its absolute
// path).
func (e *Env) WriteWakeSettings() string {
	e.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "bee-hook"), "--print-config").Output()
	must(e.t, err)
	var cfg map[string]any
	must(e.t, json.Unmarshal(out, &cfg))
	s := map[string]any{"permissions": map[string]any{"allow": []string{"mcp__bee"}}, "hooks": cfg["hooks"]}
	path := filepath.Join(e.Root, "wake-settings.json")
	writeJSON(e.t, path, s)
	return path
}

// postFromIdleSession starts an interactive wake session for agent (with
// bee and its CLI), has its model post one action in a typed turn (prompt)
// that ends saying said, and waits until the session is idle again with its
// Stop waiter armed. It returns the session and the posted action.
func (e *Env) postFromIdleSession(agent, prompt, said string, post map[string]any) (*Tmux, Record) {
	e.t.Helper()
	e.AddBeeWithCLI()
	x := e.StartWakeSession(agent, e.WriteWakeSettings())
	e.waitArmed(1, 30*time.Second)
	e.API.Push(Call(toolPost, post), Say(said))
	x.Submit(prompt)
	if !x.WaitScreen(30*time.Second, said) {
		e.t.Fatalf("the posting turn did not finish on screen (%q)", said)
	}
	rec, ok := e.FindByTitle(post["title"].(string))
	if !ok {
		e.t.Fatalf("the model's post %q is not on the board", post["title"])
	}
	e.waitArmed(1, 30*time.Second) // its Stop waiter
	return x, rec
}

// endAfterWokenTurn waits for the woken turn of session x to finish on
// screen (saying said) and its Stop waiter to arm again, then ends the
// session with /exit and requires that no waiter is left.
func endAfterWokenTurn(t *testing.T, e *Env, x *Tmux, said string) {
	t.Helper()
	if !x.WaitScreen(30*time.Second, said) {
		t.Fatalf("the woken turn did not finish on screen (%q)", said)
	}
	e.waitArmed(1, 30*time.Second)
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectNoWaiters(t, e)
}

// StartWakeSession starts an interactive claude with bee registered and
// the waiter configured, in a tmux server of its own named name, and waits
// for its prompt.
func (e *Env) StartWakeSession(name string, settings string) *Tmux {
	e.t.Helper()
	x := e.StartTmuxNamed(name, claudeBin, "--settings", settings)
	if !x.WaitReady(60 * time.Second) {
		e.t.Fatalf("session %s: the interactive CLI never showed its prompt", name)
	}
	return x
}

// armedAgents returns the live identities whose waiter is armed (none
// while the board does not exist yet).
func (e *Env) armedAgents() []Agent {
	text, err := e.BeeRun("agents", "--json")
	var agents []Agent
	if err != nil || json.Unmarshal([]byte(text), &agents) != nil {
		return nil
	}
	var out []Agent
	for _, a := range agents {
		if a.WaiterSince != nil {
			out = append(out, a)
		}
	}
	return out
}

// waitArmed waits until n identities have a waiter armed and returns them.
func (e *Env) waitArmed(n int, timeout time.Duration) []Agent {
	e.t.Helper()
	var armed []Agent
	if !eventually(timeout, func() bool { armed = e.armedAgents(); return len(armed) == n }) {
		text, err := e.BeeRun("agents", "--json")
		e.t.Fatalf("want %d armed waiters within %v, bee agents shows %s (%v)", n, timeout, text, err)
	}
	return armed
}

// waiterPattern matches a waiter's command line, whichever path ran it.
const waiterPattern = "bee-hook.* --wait-for-work"

// waiterPids lists the bee-hook --wait-for-work processes under the claude
// process claudePid (hook <- sh -c <- claude).
func (e *Env) waiterPids(claudePid int) []int {
	var pids []int
	for _, pid := range e.procs("bee-hook", waiterPattern) {
		for p, i := pid, 0; p > 1 && i < 4; i++ {
			p = ppid(p)
			if p == claudePid {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// ppid is the parent of pid, 0 when it cannot be read.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// wokenRequest waits for the first request of the main conversation after
// request number after whose body names the action, and returns it.
func (e *Env) wokenRequest(after int, actionID string, timeout time.Duration) (*APIRequest, bool) {
	var hit *APIRequest
	needle := regexp.MustCompile(`action ` + regexp.QuoteMeta(actionID) + `\b`)
	ok := e.API.WaitFor(timeout, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			if r.N > after && !r.Side && needle.Match(r.Raw) {
				hit = r
				return true
			}
		}
		return false
	})
	return hit, ok
}

// lastN is the number of the last request the fake API has seen.
func (e *Env) lastN() int {
	n := 0
	e.API.WaitFor(0, func(reqs []*APIRequest) bool {
		if len(reqs) > 0 {
			n = reqs[len(reqs)-1].N
		}
		return true
	})
	return n
}

// takeAndFinish scripts a woken turn: the model takes the action with
// bee_wait_action, finishes what it got, and ends its turn saying done.
func (e *Env) takeAndFinish(waitTool, finishTool, done string) {
	e.API.Push(
		Call(waitTool, map[string]any{"timeoutSeconds": 10}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var page Page
			if json.Unmarshal([]byte(tr.Text), &page) != nil || len(page.Records) == 0 {
				return Turn{Text: "nothing to finish: " + tr.Text}
			}
			return Turn{Tool: finishTool, Input: map[string]any{"id": page.Records[0].IDValue(), "result": done}}
		},
		Say(done),
	)
}

// wakeFor posts an action for to, waits for the request it wakes the
// session with, and returns that request and how long it took.
func (e *Env) wakeFor(to, title string) (Record, *APIRequest, time.Duration) {
	e.t.Helper()
	before := e.lastN()
	start := time.Now()
	rec := e.Post(title, "body of "+title, "--to", to)
	req, ok := e.wokenRequest(before, rec.IDString(), 30*time.Second)
	if !ok {
		e.t.Fatalf("posting %s (%q) for %s woke no request within 30 s", rec.IDString(), title, to)
	}
	return rec, req, req.At.Sub(start)
}

// wakeText is the part of a woken request's last user message that holds
// the wake line, with some context.
func wakeText(req *APIRequest, actionID string) string {
	text := req.UserText()
	i := strings.Index(text, "action "+actionID)
	if i < 0 {
		return text
	}
	from := max(i-300, 0)
	return text[from:min(len(text), i+300)]
}

// expectNoWaiters checks that no waiter of this test's world is left (once
// its claude processes have ended).
func expectNoWaiters(t *testing.T, e *Env) {
	t.Helper()
	if !eventually(5*time.Second, func() bool { return len(e.procs("bee-hook", waiterPattern)) == 0 }) {
		t.Errorf("bee-hook --wait-for-work processes left after claude ended: %v", e.procs("bee-hook", waiterPattern))
	}
}

// One idle session, from start to /exit: a fresh session nobody has typed
// into is woken by a post, and the woken request names the action; an idle
// session sends the API nothing for 20 s, and an action for another agent
// does not wake it; three wakes in a row; typing while a waiter is armed
// leaves one waiter; /clear while armed: the next wake is for the new
// identity; /exit leaves no bee-hook and no bee-mcp.
func TestWakeIdleSession(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.AddBeeWithCLI()
	x := e.StartWakeSession("idle", e.WriteWakeSettings())

	// A fresh session: its SessionStart waiter arms with nobody typing.
	armed := e.waitArmed(1, 30*time.Second)
	first := armed[0].Identity
	t.Logf("fresh session %s armed (claude pid %d)", first, x.Pid)
	if n := len(e.waiterPids(x.Pid)); n != 1 {
		t.Errorf("a fresh session has %d waiter processes, want 1", n)
	}
	e.takeAndFinish(toolWait, toolFinish, "done-fresh")
	rec, req, took := e.wakeFor("e2e", "e2e: wake a fresh session")
	t.Logf("post -> woken request #%d in %v; the model reads: %q", req.N, took, wakeText(req, rec.IDString()))
	if !strings.Contains(string(req.Raw), first) {
		t.Errorf("the woken request does not name the identity %s", first)
	}
	if !x.WaitScreen(30*time.Second, "done-fresh") {
		t.Fatal("the woken turn did not finish on screen")
	}
	if got := e.Show(rec.IDString()); got.State != "done" || got.Holder != first {
		t.Errorf("after the woken turn %s is %s by %q, want done by %s", rec.IDString(), got.State, got.Holder, first)
	}

	// Idle: the Stop waiter re-arms; for 20 s nothing reaches the API, not
	// even for an action addressed to another agent.
	e.waitArmed(1, 30*time.Second)
	before := e.lastN()
	other := e.Post("e2e: for another agent", "must not wake e2e", "--to", "someone-else")
	idle := 20 * time.Second
	time.Sleep(idle)
	if after := e.lastN(); after != before {
		t.Errorf("an idle session sent %d request(s) to the API in %v:\n%s", after-before, idle, e.API.Dump())
	}
	if got := e.Show(other.IDString()); got.State != "open" {
		t.Errorf("the action for another agent is %s, want open", got.State)
	}
	if armed := e.armedAgents(); len(armed) != 1 {
		t.Errorf("after %v idle bee agents shows %d armed waiters, want 1", idle, len(armed))
	}

	// Three wakes in a row, nobody typing.
	for i := 1; i <= 3; i++ {
		e.waitArmed(1, 30*time.Second)
		done := fmt.Sprintf("done-row-%d", i)
		e.takeAndFinish(toolWait, toolFinish, done)
		rec, req, took := e.wakeFor("e2e", fmt.Sprintf("e2e: wake %d in a row", i))
		t.Logf("wake %d: %s -> request #%d in %v", i, rec.IDString(), req.N, took)
		if !x.WaitScreen(30*time.Second, done) {
			t.Fatalf("woken turn %d did not finish on screen", i)
		}
		if got := e.Show(rec.IDString()); got.State != "done" {
			t.Errorf("wake %d: %s is %s, want done", i, rec.IDString(), got.State)
		}
	}

	// Typing while a waiter is armed: that turn's Stop starts a new waiter,
	// which supersedes the old one; one waiter is left.
	e.waitArmed(1, 30*time.Second)
	e.API.Push(Say("typed-turn-done"))
	x.Submit("Just say something.")
	if !x.WaitScreen(30*time.Second, "typed-turn-done") {
		t.Fatal("the typed turn did not finish on screen")
	}
	// The older waiter ended: one waiter process is left.
	if !eventually(10*time.Second, func() bool { return len(e.waiterPids(x.Pid)) == 1 }) {
		t.Errorf("after a typed turn %d waiter processes, want 1", len(e.waiterPids(x.Pid)))
	}
	e.waitArmed(1, 10*time.Second)

	// /clear while armed: the bridge retires its identity, and the next
	// wake is for the new one.
	logOff := len(e.BridgeLogText())
	x.Type("/clear")
	if !x.WaitScreen(10*time.Second, "/clear") {
		t.Fatal("typed /clear but the screen does not show it")
	}
	time.Sleep(150 * time.Millisecond) // let the input settle before Enter
	x.Key("Enter")
	if _, _, ok := e.WaitBridgeLog(logOff, 20*time.Second, "retired"); !ok {
		t.Fatal("the bridge logged no retire within 20 s of /clear")
	}
	armed = e.waitArmed(1, 30*time.Second)
	second := armed[0].Identity
	if second == first {
		t.Fatalf("the identity did not change across /clear: %s", second)
	}
	e.takeAndFinish(toolWait, toolFinish, "done-after-clear")
	rec, req, took = e.wakeFor("e2e", "e2e: wake after clear")
	t.Logf("after /clear: %s woke request #%d in %v as %s", rec.IDString(), req.N, took, second)
	if !strings.Contains(string(req.Raw), second) {
		t.Errorf("the wake after /clear does not name the new identity %s", second)
	}
	if !x.WaitScreen(30*time.Second, "done-after-clear") {
		t.Fatal("the woken turn after /clear did not finish on screen")
	}
	if got := e.Show(rec.IDString()); got.State != "done" || got.Holder != second {
		t.Errorf("after /clear %s is %s by %q, want done by %s", rec.IDString(), got.State, got.Holder, second)
	}

	// /exit: no waiter, no bridge, nothing held.
	e.waitArmed(1, 30*time.Second)
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
	if _, err := e.BeeRun("cancel", other.IDString()); err != nil {
		t.Logf("cancel %s: %v", other.IDString(), err)
	}
}

// Two idle sessions of the same agent and one action for anyone: exactly
// one wakes (the bridge claims before it wakes), and it is the one that
// takes and finishes the action.
func TestWakeTwoSessionsOneWakes(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.AddBeeWithCLI()
	settings := e.WriteWakeSettings()
	a := e.StartWakeSession("one", settings)
	b := e.StartWakeSession("two", settings)
	armed := e.waitArmed(2, 30*time.Second)
	t.Logf("armed: %s, %s", armed[0].Identity, armed[1].Identity)

	e.takeAndFinish(toolWait, toolFinish, "done-by-one-of-two")
	before := e.lastN()
	rec := e.Post("e2e: for anyone", "exactly one of two idle sessions takes this")
	req, ok := e.wokenRequest(before, rec.IDString(), 30*time.Second)
	if !ok {
		t.Fatal("nobody woke for an action for anyone")
	}
	if !eventually(30*time.Second, func() bool { return e.Show(rec.IDString()).State == "done" }) {
		t.Fatalf("the action was not finished: %+v", e.Show(rec.IDString()))
	}
	// Give the other session every chance to wake too.
	time.Sleep(5 * time.Second)
	sessions := map[string]bool{}
	e.API.WaitFor(0, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			if r.N > before && !r.Side {
				sessions[r.SessionID] = true
			}
		}
		return true
	})
	if len(sessions) != 1 || !sessions[req.SessionID] {
		t.Errorf("requests after the post came from sessions %v, want only the woken %s:\n%s", sessions, req.SessionID, e.API.Dump())
	}
	done := e.Show(rec.IDString())
	t.Logf("%s done by %s; %d session(s) woke", rec.IDString(), done.Holder, len(sessions))
	if left := e.armedAgents(); len(left) != 2 {
		t.Errorf("after the woken turn bee agents shows %d armed waiters, want both sessions armed again", len(left))
	}

	for _, x := range []*Tmux{a, b} {
		x.Submit("/exit")
		if !eventually(15*time.Second, x.Dead) {
			t.Fatal("claude did not exit after /exit")
		}
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
}

// The plugin, as the README recommends installing bee, with Claude Code
// started without bee's commands on its PATH: the plugin's launchers find
// them in ~/go/bin, and a fresh session is woken by a post.
func TestWakePluginWithoutPath(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.OnlyInGoBin(false)
	settings := filepath.Join(e.Root, "settings.json")
	writeJSON(t, settings, map[string]any{"permissions": map[string]any{"allow": []string{pluginPrefix}}})
	x := e.StartTmuxNamed("plugin", claudeBin, "--plugin-dir", repoRoot, "--settings", settings)
	if !x.WaitReady(60 * time.Second) {
		t.Fatal("the interactive CLI never showed its prompt")
	}
	armed := e.waitArmed(1, 30*time.Second)
	e.takeAndFinish(pluginWait, pluginPrefix+"__bee_finish_action", "plugin-woken")
	rec, req, took := e.wakeFor("e2e", "e2e: wake through the plugin")
	t.Logf("plugin session %s: %s woke request #%d in %v", armed[0].Identity, rec.IDString(), req.N, took)
	if !x.WaitScreen(30*time.Second, "plugin-woken") {
		t.Fatal("the woken turn did not finish on screen")
	}
	if got := e.Show(rec.IDString()); got.State != "done" {
		t.Errorf("%s is %s, want done", rec.IDString(), got.State)
	}
	x.Submit("/exit")
	if !eventually(15*time.Second, x.Dead) {
		t.Fatal("claude did not exit after /exit")
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
}

// `claude -p` with the waiter configured finishes as fast as without it: the
// waiter sees CLAUDE_CODE_SESSION_ATTENDED=0 and exits at once.
func TestWakePrintModeNotDelayed(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.AddBeeWithCLI()
	with := e.WriteWakeSettings()
	without := e.WriteSettings(false)
	took := map[string][]time.Duration{}
	for i := 0; i < 2; i++ {
		for _, c := range []struct{ name, settings string }{{"without", without}, {"with", with}} {
			e.API.Push(Call(toolWhoami, map[string]any{}), Say("print-done"))
			start := time.Now()
			run := e.StartHeadless(claudeBin, "Who are you on the bee board?", "--settings", c.settings, "--allowedTools", "mcp__bee")
			if err := run.Wait(t, 90*time.Second); err != nil {
				t.Fatalf("claude -p (%s the waiter): %v", c.name, err)
			}
			took[c.name] = append(took[c.name], time.Since(start))
			if !strings.Contains(run.Stdout.String(), "print-done") {
				t.Errorf("claude -p (%s the waiter) printed %q", c.name, run.Stdout.String())
			}
		}
	}
	t.Logf("claude -p: without the waiter %v, with it %v", took["without"], took["with"])
	best := func(ds []time.Duration) time.Duration {
		m := ds[0]
		for _, d := range ds[1:] {
			m = min(m, d)
		}
		return m
	}
	if w, wo := best(took["with"]), best(took["without"]); w > wo+3*time.Second {
		t.Errorf("claude -p with the waiter took %v, without %v: the waiter delays it", w, wo)
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
}
