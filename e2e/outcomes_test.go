//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

const (
	toolFail   = "mcp__bee__bee_fail_action"
	toolCancel = "mcp__bee__bee_cancel_action"
	toolAwait  = "mcp__bee__bee_await_action"
)

// One session (agent e2e) posts for agent worker and awaits; a second
// session (agent worker) claims the action and fails it with a reason; the
// first session's await returns the failure and its reason. Both are real
// `claude -p` runs on one board, scripted by one fake API.
func TestHeadlessPostAwaitFailure(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	const reason = "the build server is down"
	done := Say("done") // both sessions end their turn with it, in whatever order they ask
	e.API.Push(
		// The lead.
		Call(toolPost, map[string]any{"to": "worker", "title": "e2e: build the release", "body": "make release"}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var res struct {
				Action Record `json:"action"`
			}
			if !parseResult(t, "bee_post_action", tr, &res) {
				return Turn{Text: "post failed"}
			}
			return Turn{Tool: toolAwait, Input: map[string]any{"ids": []any{res.Action.IDValue()}, "timeoutSeconds": 60}}
		},
		// The worker, started once the lead awaits.
		Call(toolWait, map[string]any{"timeoutSeconds": 30}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var p Page
			if !parseResult(t, "bee_wait_action", tr, &p) || len(p.Records) != 1 {
				t.Errorf("the worker's bee_wait_action returned %q, want the lead's action", tr.Text)
				return Turn{Text: "nothing came"}
			}
			return Turn{Tool: toolFail, Input: map[string]any{"id": p.Records[0].IDValue(), "reason": reason}}
		},
		done, done,
	)
	lead := e.StartHeadless(claudeBin, "Hand the release build to the worker and wait for it.", "--allowedTools", "mcp__bee")
	awaitReq := e.MustToolCall(toolAwait, 1, 60*time.Second)

	workerCmd := e.Command(claudeBin, "-p", "Take the next action.", "--allowedTools", "mcp__bee")
	workerCmd.Env = append(workerCmd.Env, "BEE_AGENT=worker")
	worker := e.Start(workerCmd)

	failReq := e.MustToolCall(toolFail, 1, 60*time.Second)
	failedAt := time.Now()
	if _, tr := e.ToolResult(failReq, 30*time.Second); tr.IsError {
		t.Errorf("bee_fail_action: tool error %s", tr.Text)
	}
	resReq, tr := e.ToolResult(awaitReq, 30*time.Second)
	t.Logf("fail -> the lead's await result at the API: %v", resReq.At.Sub(failedAt))
	var got struct {
		Records []Record `json:"records"`
	}
	if parseResult(t, "bee_await_action", tr, &got) {
		if len(got.Records) != 1 || got.Records[0].State != "failed" || got.Records[0].Reason != reason {
			t.Errorf("bee_await_action returned %+v, want the action failed with %q", got.Records, reason)
		}
	}
	// Claude Code 2.1.328 hands the model the structured result as JSON.
	if !strings.Contains(tr.Text, `"state":"failed"`) || !strings.Contains(tr.Text, reason) {
		t.Errorf("what the model read = %q, want the failure and its reason", tr.Text)
	}
	for name, r := range map[string]*Run{"lead": lead, "worker": worker} {
		if err := r.Wait(t, 60*time.Second); err != nil {
			t.Errorf("claude -p (%s): %v", name, err)
		}
	}
	expectCleanEnd(t, e)
}

// A person cancels an action a session holds; the session's finish is
// refused with who cancelled it and why.
func TestHeadlessCancelledHolderIsTold(t *testing.T) {
	e := NewEnv(t)
	e.AddBeeWithCLI()
	a := e.Post("e2e: soon obsolete", "do it")
	claimed := make(chan string, 1)
	e.API.Push(
		Call(toolWait, map[string]any{"timeoutSeconds": 30}),
		func(r *APIRequest) Turn {
			tr, _ := r.LastToolResult()
			var p Page
			if !parseResult(t, "bee_wait_action", tr, &p) || len(p.Records) != 1 {
				t.Errorf("bee_wait_action returned %q, want %s", tr.Text, a.IDString())
				return Turn{Text: "nothing came"}
			}
			claimed <- p.Records[0].IDString()
			// Cancelled meanwhile (below), before the model finishes.
			if !eventually(20*time.Second, func() bool { return e.Show(a.IDString()).State == "cancelled" }) {
				t.Errorf("%s was not cancelled", a.IDString())
			}
			return Turn{Tool: toolFinish, Input: map[string]any{"id": p.Records[0].IDValue(), "result": "did it anyway"}}
		},
		Say("stopped"),
	)
	run := e.StartHeadless(claudeBin, "Take the next action and finish it.", "--allowedTools", "mcp__bee")
	select {
	case id := <-claimed:
		e.Bee("cancel", id, "--reason", "the plan changed")
	case <-time.After(60 * time.Second):
		t.Fatal("the session never claimed the action")
	}
	_, tr := e.ToolResult(e.MustToolCall(toolFinish, 1, 60*time.Second), 30*time.Second)
	t.Logf("finishing a cancelled action: is_error=%v %q", tr.IsError, tr.Text)
	if !tr.IsError || !strings.Contains(tr.Text, "cancelled by user:") || !strings.Contains(tr.Text, "the plan changed") {
		t.Errorf("finish of a cancelled action: want a tool error naming the canceller and the reason, got is_error=%v %q", tr.IsError, tr.Text)
	}
	if err := run.Wait(t, 60*time.Second); err != nil {
		t.Errorf("claude -p: %v", err)
	}
	if rec := e.Show(a.IDString()); rec.State != "cancelled" {
		t.Errorf("%s is %s, want cancelled", a.IDString(), rec.State)
	}
	expectCleanEnd(t, e)
}

// An idle interactive session that posted an action is woken, with nobody
// typing, when that action fails: the woken request carries the outcome
// and its reason. The worker here is the test itself, on the same board.
func TestWakePosterHearsOutcome(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// A typed turn: the model posts work for agent worker and ends its turn.
	const title, reason = "e2e: run the migration", "the database is read-only"
	x, rec := e.postFromIdleSession("poster", "Hand the migration to the worker.", "posted-it",
		map[string]any{"to": "worker", "title": title, "body": "bee migrate"})

	b, err := board.Open(e.Board, nil)
	must(t, err)
	defer b.Close()
	worker := identity.ID("agent:worker#0000e2e0")
	must(t, b.Join(t.Context(), actions.Member{ID: worker, PID: os.Getpid()}))
	defer b.Depart(context.WithoutCancel(t.Context()), worker)
	p, err := b.Next(t.Context(), worker, "", 10*time.Second)
	must(t, err)
	if len(p.Records) != 1 || p.Records[0].ID != rec.IDString() {
		t.Fatalf("the worker claimed %+v, want %s", p.Records, rec.IDString())
	}

	e.API.Push(Say("heard-the-failure"))
	before := e.lastN()
	start := time.Now()
	if _, err := b.Fail(t.Context(), worker, rec.IDString(), reason); err != nil {
		t.Fatal(err)
	}
	req, ok := e.wokenRequest(before, rec.IDString(), 30*time.Second)
	if !ok {
		t.Fatalf("the fail of %s woke no request within 30 s", rec.IDString())
	}
	text := wakeText(req, rec.IDString())
	t.Logf("fail -> woken request #%d in %v; the model reads: %q", req.N, req.At.Sub(start), text)
	if !strings.Contains(text, "failed") || !strings.Contains(text, reason) {
		t.Errorf("the woken request says %q, want the failure and its reason", text)
	}
	endAfterWokenTurn(t, e, x, "heard-the-failure")
}
