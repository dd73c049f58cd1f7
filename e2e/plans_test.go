//go:build e2e

package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Plans in the real Claude Code: a lead session posts a plan with
// bee_post_plan and ends its turn; the steps are taken, in order, by the
// idle sessions they are for, each woken by bee when its step opens; the
// lead is woken as steps end. Three interactive sessions (agents lead,
// alpha and beta) on one board, scripted by one fake model that reacts to
// what each request holds (planModel), since the three sessions' requests
// interleave in no fixed order.

const toolPlan = "mcp__bee__bee_post_plan"

// The plans the lead posts: three steps for two agents, in a chain. In the
// second, beta fails the middle step.
var (
	planOK = []map[string]any{
		{"key": "schema", "to": "alpha", "title": "e2e plan: migrate the schema", "body": "step one"},
		{"key": "service", "to": "beta", "title": "e2e plan: update the service", "body": "step two", "after": []string{"schema"}},
		{"key": "load", "to": "alpha", "title": "e2e plan: run the load test", "body": "step three", "after": []string{"service"}},
	}
	planFail = []map[string]any{
		{"key": "s1", "to": "alpha", "title": "e2e plan 2: back up the data", "body": "step one"},
		{"key": "s2", "to": "beta", "title": "e2e plan 2: FAIL to restore", "body": "step two", "after": []string{"s1"}},
		{"key": "s3", "to": "alpha", "title": "e2e plan 2: verify the restore", "body": "step three", "after": []string{"s2"}},
	}
)

// failReason is what beta fails a step whose title says FAIL with.
const failReason = "the backup is corrupt"

// planModel is the fake model of every session of the test: each request
// is answered from what its last user message holds.
//
//   - a prompt "Post plan ok" or "Post plan fail" (the lead, typed): post
//     that plan with bee_post_plan;
//   - a wake line for work ("... is waiting for ...; call bee_wait_action"):
//     call bee_wait_action;
//   - bee_wait_action's answer with an action: finish it, or fail it when
//     its title says FAIL;
//   - anything else (an answer to a post, finish or fail; a wake about an
//     outcome, "you posted"): end the turn, unless work is waiting (a wake
//     line that arrived with a tool result), then take it.
func planModel(t *testing.T) Step {
	return func(r *APIRequest) Turn {
		last := lastUserRaw(r)
		workWaiting := strings.Contains(last, "is waiting for") && strings.Contains(last, "bee_wait_action")
		if tr, ok := r.LastToolResult(); ok {
			var res struct {
				Records []Record          `json:"records"`
				Cursor  json.RawMessage   `json:"cursor"`
				IDs     map[string]string `json:"ids"`
				Action  *Record           `json:"action"`
			}
			_ = json.Unmarshal([]byte(tr.Text), &res)
			switch {
			case tr.IsError:
				t.Errorf("a tool call was refused: %s", tr.Text)
			case res.Cursor != nil && len(res.Records) == 1:
				rec := res.Records[0]
				if strings.Contains(rec.Title, "FAIL") {
					return Turn{Tool: toolFail, Input: map[string]any{"id": rec.IDValue(), "reason": failReason}}
				}
				return Turn{Tool: toolFinish, Input: map[string]any{"id": rec.IDValue(), "result": "did " + rec.Title}}
			case res.IDs != nil:
				return Turn{Text: "plan-posted"}
			}
			if workWaiting {
				return Turn{Tool: toolWait, Input: map[string]any{"timeoutSeconds": 10}}
			}
			return Turn{Text: "turn-over"}
		}
		switch {
		case strings.Contains(last, "Post plan ok"):
			return Turn{Tool: toolPlan, Input: map[string]any{"actions": planOK}}
		case strings.Contains(last, "Post plan fail"):
			return Turn{Tool: toolPlan, Input: map[string]any{"actions": planFail}}
		case workWaiting:
			return Turn{Tool: toolWait, Input: map[string]any{"timeoutSeconds": 10}}
		}
		return Turn{Text: "heard-it"}
	}
}

// lastUserRaw is the raw content of the request's last user message.
func lastUserRaw(r *APIRequest) string {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		if m := r.Body.Messages[i]; m.Role == "user" {
			return string(m.Content)
		}
	}
	return ""
}

// startAgentSession starts an interactive claude whose bridge runs as
// agent, with bee's tools allowed and the waiter configured, in a tmux
// server of its own named name, and waits for its prompt. env(1) sets the
// agent and execs claude, so the pane's process is claude.
func (e *Env) startAgentSession(name, agent, settings string) *Tmux {
	e.t.Helper()
	x := e.startTmux("tmux-"+name+".sock", "env", "BEE_AGENT="+agent, claudeBin, "--debug-file", e.DebugLog, "--settings", settings)
	if !x.WaitReady(90 * time.Second) {
		e.t.Fatalf("session %s: the interactive CLI never showed its prompt", name)
	}
	return x
}

// planRecord is an action as `bee show --json` shows it, with what the
// plan test reads.
type planRecord struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	Title     string     `json:"title"`
	Holder    string     `json:"holder"`
	Reason    string     `json:"reason"`
	EndedBy   string     `json:"endedBy"`
	After     []string   `json:"after"`
	BlockedBy []string   `json:"blockedBy"`
	ClaimedAt *time.Time `json:"claimedAt"`
	EndedAt   *time.Time `json:"endedAt"`
}

func (e *Env) showPlanRecord(id string) planRecord {
	e.t.Helper()
	var r planRecord
	if err := json.Unmarshal([]byte(e.Bee("show", "--json", id)), &r); err != nil {
		e.t.Fatalf("bee show --json %s: %v", id, err)
	}
	return r
}

// postPlanAsLead types prompt into the lead's session and returns the
// key→id map its bee_post_plan got, and the lead's Claude Code session id.
func (e *Env) postPlanAsLead(lead *Tmux, prompt string, n int) (map[string]string, string) {
	e.t.Helper()
	lead.Submit(prompt)
	req := e.MustToolCall(toolPlan, n, 60*time.Second)
	_, tr := e.ToolResult(req, 30*time.Second)
	var res struct {
		IDs  map[string]string `json:"ids"`
		Last []string          `json:"last"`
		Next string            `json:"next"`
	}
	if !parseResult(e.t, "bee_post_plan", tr, &res) {
		e.t.FailNow()
	}
	e.t.Logf("bee_post_plan: ids %v, last %v; next: %q", res.IDs, res.Last, res.Next)
	if len(res.IDs) != 3 || len(res.Last) != 1 {
		e.t.Fatalf("bee_post_plan answered ids %v and last %v, want 3 ids and one last step", res.IDs, res.Last)
	}
	if !strings.Contains(res.Next, "bee wakes you") || !strings.Contains(res.Next, res.Last[0]) {
		e.t.Errorf("bee_post_plan's next %q does not say that bee wakes the lead, nor name the last step %s", res.Next, res.Last[0])
	}
	return res.IDs, req.SessionID
}

// wokenFor reports whether the session of a request after request number
// after was woken for work on action id addressed to agent (the wake line
// names both), and in which session.
func (e *Env) wokenFor(after int, id, agent string) (string, bool) {
	needle := regexp.MustCompile(`action ` + regexp.QuoteMeta(id) + ` .{0,200}is waiting for agent:` + regexp.QuoteMeta(agent) + `#`)
	session := ""
	ok := e.API.WaitFor(0, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			if r.N > after && !r.Side && needle.MatchString(lastUserRaw(r)) {
				session = r.SessionID
				return true
			}
		}
		return false
	})
	return session, ok
}

// leadHeard waits for a request of the lead's session after request
// number after whose last user message says that action id (which the
// lead posted) ended as state says, and returns it.
func (e *Env) leadHeard(lead string, after int, id, state string, timeout time.Duration) (*APIRequest, bool) {
	needle := regexp.MustCompile(`action ` + regexp.QuoteMeta(id) + ` you posted .{0,300}` + regexp.QuoteMeta(state))
	var hit *APIRequest
	ok := e.API.WaitFor(timeout, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			if r.N > after && !r.Side && r.SessionID == lead && needle.MatchString(lastUserRaw(r)) {
				hit = r
				return true
			}
		}
		return false
	})
	return hit, ok
}

// waitEnded waits until every action ids names has ended.
func (e *Env) waitEnded(timeout time.Duration, ids ...string) {
	e.t.Helper()
	var last []planRecord
	if !eventually(timeout, func() bool {
		last = last[:0]
		for _, id := range ids {
			r := e.showPlanRecord(id)
			last = append(last, r)
			if r.State == "open" || r.State == "claimed" || r.State == "blocked" {
				return false
			}
		}
		return true
	}) {
		e.t.Fatalf("the plan's actions did not all end within %v: %+v", timeout, last)
	}
}

// TestWakePlan: a lead posts a three-step plan for two agents and ends its
// turn. The steps are taken in order by the idle sessions they are for,
// each woken by bee, and the lead is woken when the last one ends. Then a
// second plan whose middle step fails: its last step is cancelled, and the
// lead hears of both.
func TestWakePlan(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.AddBeeWithCLI()
	settings := e.WriteWakeSettings()
	for range 200 {
		e.API.Push(planModel(t))
	}
	lead := e.startAgentSession("lead", "lead", settings)
	alpha := e.startAgentSession("alpha", "alpha", settings)
	beta := e.startAgentSession("beta", "beta", settings)
	armed := e.waitArmed(3, 60*time.Second)
	t.Logf("armed: %s, %s, %s", armed[0].Identity, armed[1].Identity, armed[2].Identity)

	// The plan that goes through.
	before := e.lastN()
	ids, leadSession := e.postPlanAsLead(lead, "Post plan ok.", 1)
	s1, s2, s3 := ids["schema"], ids["service"], ids["load"]
	if !lead.WaitScreen(30*time.Second, "plan-posted") {
		t.Fatal("the lead's posting turn did not finish on screen")
	}
	// Posted: the later steps wait, and say for what.
	if r := e.showPlanRecord(s3); r.State != "blocked" || len(r.After) != 1 || r.After[0] != s2 {
		t.Errorf("right after the post %s is %s after %v, want blocked after %s", s3, r.State, r.After, s2)
	}
	e.waitEnded(120*time.Second, s1, s2, s3)
	steps := []struct{ id, agent string }{{s1, "alpha"}, {s2, "beta"}, {s3, "alpha"}}
	recs := make([]planRecord, len(steps))
	for i, st := range steps {
		recs[i] = e.showPlanRecord(st.id)
		r := recs[i]
		t.Logf("%s: %s by %s, claimed %v, ended %v", r.ID, r.State, r.Holder, r.ClaimedAt, r.EndedAt)
		if r.State != "done" || !strings.HasPrefix(r.Holder, "agent:"+st.agent+"#") {
			t.Errorf("%s is %s, held by %q; want done by agent %s", r.ID, r.State, r.Holder, st.agent)
		}
		// Each was taken by a session bee woke for it, not found by a poll.
		if _, ok := e.wokenFor(before, st.id, st.agent); !ok {
			t.Errorf("no %s session was woken for %s", st.agent, st.id)
		}
		if i > 0 {
			prev := recs[i-1]
			if r.ClaimedAt == nil || prev.EndedAt == nil || r.ClaimedAt.Before(*prev.EndedAt) {
				t.Errorf("%s was claimed at %v, before %s ended at %v", r.ID, r.ClaimedAt, prev.ID, prev.EndedAt)
			} else {
				t.Logf("%s done -> %s claimed by the session woken for it: %v", prev.ID, r.ID, r.ClaimedAt.Sub(*prev.EndedAt))
			}
		}
	}
	// The lead is woken when the last step ends.
	req, ok := e.leadHeard(leadSession, before, s3, "is done", 60*time.Second)
	if !ok {
		t.Fatalf("the lead was not woken with the end of %s", s3)
	}
	t.Logf("%s done -> the lead's woken request #%d, %v later", s3, req.N, req.At.Sub(*recs[2].EndedAt))

	// The plan whose middle step fails: the last is cancelled, and the lead
	// hears of both.
	e.waitArmed(3, 60*time.Second)
	before = e.lastN()
	ids, _ = e.postPlanAsLead(lead, "Post plan fail.", 2)
	f1, f2, f3 := ids["s1"], ids["s2"], ids["s3"]
	e.waitEnded(120*time.Second, f1, f2, f3)
	got := []planRecord{e.showPlanRecord(f1), e.showPlanRecord(f2), e.showPlanRecord(f3)}
	for _, r := range got {
		t.Logf("%s: %s by %q (%s), holder %q", r.ID, r.State, r.EndedBy, r.Reason, r.Holder)
	}
	switch {
	case got[0].State != "done":
		t.Errorf("%s is %s, want done", f1, got[0].State)
	case got[1].State != "failed" || got[1].Reason != failReason:
		t.Errorf("%s is %s (%q), want failed with %q", f2, got[1].State, got[1].Reason, failReason)
	case got[2].State != "cancelled" || got[2].Holder != "" || !strings.Contains(got[2].Reason, "prerequisite "+f2+" failed") || !strings.Contains(got[2].Reason, failReason):
		t.Errorf("%s is %s (%q), held by %q; want cancelled, never claimed, naming %s and why it failed", f3, got[2].State, got[2].Reason, got[2].Holder, f2)
	}
	if _, ok := e.leadHeard(leadSession, before, f2, "failed", 60*time.Second); !ok {
		t.Errorf("the lead was not woken with the failure of %s", f2)
	}
	if _, ok := e.leadHeard(leadSession, before, f3, "cancelled", 60*time.Second); !ok {
		t.Errorf("the lead was not woken with the cancel of %s", f3)
	}
	if t.Failed() {
		t.Logf("requests:\n%s", e.API.Dump())
	}

	for _, x := range []*Tmux{lead, alpha, beta} {
		x.Submit("/exit")
		if !eventually(15*time.Second, x.Dead) {
			t.Fatal("claude did not exit after /exit")
		}
	}
	expectNoWaiters(t, e)
	expectCleanEnd(t, e)
}
