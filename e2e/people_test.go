//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// An interactive session asks a person (to user:alice) and ends its turn:
// no agent takes the question, and the session makes no model request
// while it waits. `bee answer` wakes it, with the answer in its next
// request.
func TestWakeAskerHearsAnswer(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	const title, answer = "e2e: may I drop the sessions table?", "Yes, drop it after the backup"
	x, rec := e.postFromIdleSession("asker", "Ask Alice whether the sessions table can go.", "asked-alice",
		map[string]any{"to": "user:alice", "title": title, "body": "It is unused since v2; a backup exists."})
	before := e.lastN()

	// A while with the question waiting: nobody takes it, and the idle
	// session asks the model nothing.
	time.Sleep(3 * time.Second)
	if got := e.Show(rec.IDString()); got.State != "open" || got.Holder != "" {
		t.Fatalf("the question is %s, held by %q; want open, held by nobody", got.State, got.Holder)
	}
	if n := e.lastN(); n != before {
		t.Errorf("the session made %d model requests while it waited for the person; want 0", n-before)
	}
	if inbox := e.Bee("inbox", "--as", "alice"); !strings.Contains(inbox, rec.IDString()) || !strings.Contains(inbox, title) {
		t.Errorf("bee inbox --as alice does not list %s: %q", rec.IDString(), inbox)
	}

	e.API.Push(Say("heard-the-answer"))
	start := time.Now()
	e.Bee("answer", "--as", "alice", rec.IDString(), answer)
	// The wake reads as an answer: "bee: user:alice answered your question
	// a-1 (title): the answer".
	var req *APIRequest
	if !e.API.WaitFor(30*time.Second, func(reqs []*APIRequest) bool {
		for _, r := range reqs {
			if r.N > before && !r.Side && strings.Contains(r.UserText(), "question "+rec.IDString()) {
				req = r
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the answer to %s woke no request within 30 s", rec.IDString())
	}
	text := req.UserText()
	if i := strings.Index(text, "bee: user:alice answered"); i >= 0 {
		text = text[i:]
	}
	t.Logf("bee answer -> woken request #%d in %v; the model reads: %q", req.N, req.At.Sub(start), text)
	if !strings.Contains(text, "user:alice answered your question "+rec.IDString()) || !strings.Contains(text, answer) {
		t.Errorf("the woken request says %q, want alice's answer %q to %s", text, answer, rec.IDString())
	}
	if got := e.Show(rec.IDString()); got.State != "done" || got.Result != any(answer) || got.Holder != "user:alice" {
		t.Errorf("after the answer %s is %s, held by %q, result %q; want done by user:alice with the answer", rec.IDString(), got.State, got.Holder, got.Result)
	}
	endAfterWokenTurn(t, e, x, "heard-the-answer")
}
