//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/internal/logkey"
)

// toolAgent is Claude Code 2.1.328's subagent tool (once called Task). Its
// input requires description and prompt; run_in_background is a boolean
// (background is its default) and subagent_type picks the agent.
const toolAgent = "Agent"

// Markers put in each subagent's prompt and in the main prompt, so the fake
// model can tell the three conversations of one session apart: they share
// the session id, and differ in their first user message.
const (
	markMain = "bee-e2e-main"
	markSubA = "bee-subagent-A"
	markSubB = "bee-subagent-B"
)

// conversation is the marker in r's first user message, or "other".
func conversation(r *APIRequest) string {
	if len(r.Body.Messages) == 0 {
		return "other"
	}
	var text strings.Builder
	for _, b := range r.Body.Messages[0].Blocks() {
		text.WriteString(b.Text)
	}
	for _, m := range []string{markSubA, markSubB, markMain} {
		if strings.Contains(text.String(), m) {
			return m
		}
	}
	return "other"
}

// claimedRecord is the part of a record that shows when it was claimed.
type claimedRecord struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Holder    string `json:"holder"`
	ClaimedAt string `json:"claimedAt"`
}

// subagentRun is what the fake model saw of one subagent.
type subagentRun struct {
	requests int
	waitReq  *APIRequest    // the request answered with bee_wait_action
	got      []Record       // what its bee_wait_action returned
	claimed  *claimedRecord // the same record, with its claim time
	raw      string         // the wait's result as the model read it
}

func (s *subagentRun) String() string {
	asked := 0
	if s.waitReq != nil {
		asked = s.waitReq.N
	}
	return fmt.Sprintf("{requests:%d waitAskedIn:#%d result:%.300q}", s.requests, asked, s.raw)
}

// Two background subagents of one headless session wait side by side on
// the session's one bridge connection (Claude Code gives them no
// connection of their own, and nothing in their calls tells them apart).
// Once both waits run in the bridge, two actions are posted: each subagent
// gets one, a different one; both are claimed by the session's one
// identity, once, and finished; the bridge cancels, supersedes and gives
// back nothing; and the model requests stay at what the script needs (no
// retry loop).
func TestSubagentsWaitSideBySide(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.AddBeeWithCLI()

	var mu sync.Mutex
	subs := map[string]*subagentRun{markSubA: {}, markSubB: {}}
	mainRequests, otherRequests := 0, 0
	agentCall := func(mark string) map[string]any {
		return map[string]any{
			"description":       "take one bee action",
			"prompt":            "You are " + mark + ". Take the next bee action with bee_wait_action and finish it.",
			"subagent_type":     "general-purpose",
			"run_in_background": true,
		}
	}
	// One step serves every conversation: requests of the three arrive in
	// any order, so each is answered by where its own conversation stands.
	route := func(r *APIRequest) Turn {
		conv := conversation(r)
		mu.Lock()
		defer mu.Unlock()
		switch conv {
		case markMain:
			mainRequests++
			if mainRequests == 1 {
				// Both subagents in one message, as a model launches
				// parallel work.
				return Turn{Tool: toolAgent, Input: agentCall(markSubA), Also: []ToolUse{{Tool: toolAgent, Input: agentCall(markSubB)}}}
			}
			return Turn{Text: fmt.Sprintf("main: turn %d", mainRequests)}
		case markSubA, markSubB:
		default:
			otherRequests++
			return Turn{Text: "not part of this test"}
		}
		s := subs[conv]
		s.requests++
		switch s.requests {
		case 1:
			s.waitReq = r
			return Turn{Tool: toolWait, Input: map[string]any{"timeoutSeconds": 60}}
		case 2:
			tr, _ := r.LastToolResult()
			s.raw = tr.Text
			var page Page
			if !parseResult(t, conv+" bee_wait_action", tr, &page) || len(page.Records) != 1 {
				return Turn{Text: conv + ": no action came"}
			}
			s.got = page.Records
			var claimed struct {
				Records []claimedRecord `json:"records"`
			}
			if tr.JSON(&claimed) == nil && len(claimed.Records) == 1 {
				s.claimed = &claimed.Records[0]
			}
			return Turn{Tool: toolFinish, Input: map[string]any{"id": page.Records[0].IDValue(), "result": "finished by " + conv}}
		case 3:
			return Turn{Text: conv + ": finished"}
		}
		return Turn{Text: conv + ": again?"}
	}
	// Expected: main 2 turns plus 1 or 2 for the subagents' end notices
	// (Claude Code hands two that come close together to one turn), each
	// subagent 3. The budget leaves room for a few more; a loop exhausts
	// it, and the run then ends on "script exhausted" replies.
	const budget = 16
	for range budget {
		e.API.Push(route)
	}
	e.OnFailure(func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("---- conversations: main %d requests, other %d, %s %s, %s %s",
			mainRequests, otherRequests, markSubA, subs[markSubA], markSubB, subs[markSubB])
	})

	start := time.Now()
	run := e.StartHeadless(claudeBin, markMain+": start two background subagents that each take one bee action.", "--allowedTools", "mcp__bee")

	// Both subagents call bee_wait_action, and both calls are running in
	// the bridge at once (each logs its start; nothing is on the board, so
	// neither can end).
	e.MustToolCall(toolWait, 2, 60*time.Second)
	waitLine := `msg="tool call" ` // the start, not "tool call done"
	waitTool := logkey.Tool + "=bee_wait_action"
	if !eventually(20*time.Second, func() bool { return len(e.bridgeLogLines(waitLine, waitTool)) == 2 }) {
		t.Fatalf("the bridge did not log two bee_wait_action calls starting: %q", e.bridgeLogLines(waitLine, waitTool))
	}
	mu.Lock()
	waitA, waitB := subs[markSubA].waitReq, subs[markSubB].waitReq
	mu.Unlock()
	if waitA == nil || waitB == nil {
		t.Fatalf("the two bee_wait_action calls did not come one from each subagent (A %v, B %v)", waitA != nil, waitB != nil)
	}
	for _, w := range []*APIRequest{waitA, waitB} {
		if _, _, done := e.API.WaitResultFor(0, w.ToolUseID); done {
			t.Fatalf("a bee_wait_action (%s) returned before anything was posted", w.ToolUseID)
		}
	}
	if n := len(e.bridgeLogLines(`msg="tool call done"`, waitTool)); n != 0 {
		t.Fatalf("%d bee_wait_action calls ended in the bridge before anything was posted", n)
	}
	bothWaiting := time.Now()
	t.Logf("both waits running in the bridge %v after start (requests #%d and #%d)", bothWaiting.Sub(start).Round(time.Millisecond), waitA.N, waitB.N)

	identities := e.Agents()
	if len(identities) != 1 {
		t.Fatalf("bee agents shows %d identities, want the session's one: %+v", len(identities), identities)
	}
	who := identities[0].Identity

	postedAt := map[string]time.Time{} // id -> when its `bee post` started
	at := time.Now()
	first := e.Post("e2e: for a subagent (1)", "one of two")
	postedAt[first.IDString()] = at
	at = time.Now()
	second := e.Post("e2e: for a subagent (2)", "two of two")
	postedAt[second.IDString()] = at

	results := map[string]*APIRequest{}
	for name, w := range map[string]*APIRequest{markSubA: waitA, markSubB: waitB} {
		req, _, ok := e.API.WaitResultFor(30*time.Second, w.ToolUseID)
		if !ok {
			t.Fatalf("%s's bee_wait_action (%s) got no result within 30 s of the posts", name, w.ToolUseID)
		}
		results[name] = req
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	elapsed := time.Since(start)

	mu.Lock()
	a, b := *subs[markSubA], *subs[markSubB]
	mains, others := mainRequests, otherRequests
	mu.Unlock()
	for name, s := range map[string]subagentRun{markSubA: a, markSubB: b} {
		if len(s.got) != 1 {
			t.Fatalf("%s's bee_wait_action returned %d records, want 1: %s", name, len(s.got), s.raw)
		}
		id := s.got[0].IDString()
		t.Logf("%s: bee_wait_action asked in request #%d, its result (%s) in request #%d, %v after `bee post` of %s began",
			name, s.waitReq.N, id, results[name].N, results[name].At.Sub(postedAt[id]).Round(time.Millisecond), id)
		if g := s.got[0]; g.State != "claimed" || g.Holder != who {
			t.Errorf("%s got %s state=%s holder=%s, want claimed by the session's %s", name, g.IDString(), g.State, g.Holder, who)
		}
	}
	gotA, gotB := a.got[0].IDString(), b.got[0].IDString()
	if gotA == gotB {
		t.Fatalf("both subagents got %s", gotA)
	}
	want := []string{first.IDString(), second.IDString()}
	got := []string{gotA, gotB}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the subagents got %v, want the posted %v", got, want)
	}

	// Each action claimed once, by the session's identity, and finished
	// by the subagent that got it: the claim the wait handed over is the
	// one the board ends with (same claim time).
	for name, s := range map[string]subagentRun{markSubA: a, markSubB: b} {
		id := s.got[0].IDString()
		var shown claimedRecord
		if err := json.Unmarshal([]byte(e.Bee("show", "--json", id)), &shown); err != nil {
			t.Fatalf("bee show --json %s: %v", id, err)
		}
		t.Logf("bee show %s: state=%s holder=%s claimedAt=%s", id, shown.State, shown.Holder, shown.ClaimedAt)
		if shown.State != "done" || shown.Holder != who {
			t.Errorf("bee show %s: state=%s holder=%s, want done by %s", id, shown.State, shown.Holder, who)
		}
		if s.claimed == nil || s.claimed.ClaimedAt == "" || shown.ClaimedAt != s.claimed.ClaimedAt {
			t.Errorf("bee show %s: claimed at %q, but %s's wait handed over a claim made at %v: claimed more than once?", id, shown.ClaimedAt, name, s.claimed)
		}
	}

	// The bridge served the two waits side by side: none cancelled,
	// superseded or given back; each ended once, with an action.
	logText := strings.ToLower(e.BridgeLogText())
	for _, bad := range []string{"supersed", "cancel", "given back", "withheld", "not handed over", "went back to the board"} {
		if strings.Contains(logText, bad) {
			t.Errorf("the bridge log says %q: %q", bad, e.bridgeLogLines(bad))
		}
	}
	if n := len(e.bridgeLogLines(`msg="tool call"`, waitTool)); n != 2 {
		t.Errorf("the bridge started %d bee_wait_action calls, want 2", n)
	}
	ends := e.bridgeLogLines(`msg="tool call done"`, waitTool)
	if len(ends) != 2 {
		t.Errorf("the bridge ended %d bee_wait_action calls, want 2: %q", len(ends), ends)
	}
	for _, l := range ends {
		if !strings.Contains(l, logkey.IsError+"=false") {
			t.Errorf("a bee_wait_action ended as a refusal: %s", l)
		}
	}

	// No loop: each conversation made exactly the requests its script has.
	total, side := 0, 0
	e.API.WaitFor(0, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			total++
			if r.Side {
				side++
			}
		}
		return true
	})
	e.API.WaitFor(0, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			what := fmt.Sprintf("say %.40q", r.Answer.Text)
			if r.Answer.Tool != "" {
				what = "call " + r.Answer.Tool
				for _, u := range r.Answer.Also {
					what += " + " + u.Tool
				}
			}
			var results []string
			for _, tr := range r.ToolResults() {
				results = append(results, fmt.Sprintf("%s %.60q", tr.ToolUseID, tr.Text))
			}
			t.Logf("request #%d %s %s side=%v results=%v -> %s", r.N, r.At.Sub(start).Round(time.Millisecond), conversation(r), r.Side, results, what)
		}
		return true
	})
	t.Logf("model requests: %d in all (%d side calls); main %d, %s %d, %s %d, other %d; run %v",
		total, side, mains, markSubA, a.requests, markSubB, b.requests, others, elapsed.Round(time.Millisecond))
	if a.requests != 3 || b.requests != 3 {
		t.Errorf("subagent requests: A %d, B %d; want 3 each (wait, finish, end)", a.requests, b.requests)
	}
	if mains > 4 || others > 0 {
		t.Errorf("main conversation made %d requests (want at most 4: launch, end, and the subagents' end notices), other %d", mains, others)
	}
	if left := e.API.Pending(); left < budget-10 {
		t.Errorf("the run used %d of %d scripted steps, want at most 10", budget-left, budget)
	}
	expectCleanEnd(t, e)
}

// bridgeLogLines returns the lines of the bridge's stderr that contain
// every one of subs (ignoring case).
func (e *Env) bridgeLogLines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(e.BridgeLogText(), "\n") {
		if containsAll(strings.ToLower(line), lower(subs)...) {
			out = append(out, line)
		}
	}
	return out
}
