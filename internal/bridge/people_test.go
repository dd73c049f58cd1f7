package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// bee_post_action tells the model when to ask a person, and to end its
// turn after asking; its to argument names the two ways to address people.
func TestServer_DescribesAskingPeople(t *testing.T) {
	cs := connectAs(t, newTimeouts(), "claude-code", "2.1.328")
	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	for _, tool := range tools.Tools {
		if tool.Name != ToolPost {
			continue
		}
		for _, s := range []string{"user:<name>", "people", "must not take alone", "approving a migration", "choosing between designs",
			"credential", "then end your turn", "the person's answer comes back as its outcome"} {
			require.Contains(t, tool.Description, s)
		}
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		raw, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &schema))
		require.Contains(t, schema.Properties["to"].Description, "To ask a person, user:<name>")
		return
	}
	t.Fatalf("no %s among the tools", ToolPost)
}

// The answer to a post addressed to people says to end the turn (bee wakes
// the session with the answer); under a client bee cannot wake, to await
// it. A post to an agent keeps its own next step.
func TestPost_AskingPeopleNext(t *testing.T) {
	posted := func(_ context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
		return actions.Record{ID: "a-3", To: d.To, From: string(by), Title: d.Title, State: actions.Open}, nil
	}
	for _, tc := range []struct {
		client, to string
		want       []string
		never      []string
	}{
		{client: "claude-code", to: "user:alice", want: []string{"Asked as a-3", "End your turn now", "bee wakes this session with the answer", ToolCancel},
			never: []string{ToolAwait}},
		{client: "claude-code", to: actions.People, want: []string{"Asked as a-3", "End your turn now"}},
		{client: "codex-mcp-client", to: "user:alice", want: []string{"Asked as a-3", "bee cannot wake this Codex CLI session", ToolAwait, `["a-3"]`},
			never: []string{"End your turn"}},
		{client: "claude-code", to: "reviewer", want: []string{"Posted as a-3"}, never: []string{"Asked as"}},
	} {
		t.Run(tc.client+"/"+tc.to, func(t *testing.T) {
			cs := connectAs(t, &actionstest.Source{PostFunc: posted}, tc.client, "1")
			res := call(t, cs, ToolPost, map[string]any{"to": tc.to, "title": "approve the migration?", "body": "b"})
			out := structured[actionOut](t, res)
			require.Equal(t, tc.to, out.Action.To)
			for _, s := range tc.want {
				require.Contains(t, out.Next, s)
			}
			for _, s := range tc.never {
				require.NotContains(t, out.Next, s)
			}
		})
	}
}

// A session asks a person through its tool and its waiter sleeps: the
// question wakes neither it nor another agent's waiter. The person's
// answer wakes the asker once, with a line that carries the answer.
func TestWaitForWork_AskerWokenOnceByAnswer(t *testing.T) {
	b := openBoard(t)
	bystander := newWakeSession(t, b, time.Minute)
	by := arm(t, bystander, WaitRequest{})
	armedOnBoard(t, b, bystander.Identity())

	s, err := NewSession(t.Context(), Config{Agent: "asker", Source: b, ClaudePID: 4243, HandoverWithin: time.Minute})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	cs := connectPending(t, Ready(s), nil, nil)
	out := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"to": "user:alice", "title": "approve the migration?", "body": "it drops a column"}))
	require.Contains(t, out.Next, "End your turn")
	q := out.Action

	a := arm(t, s, WaitRequest{}) // its turn ended: it looks at the board first, and finds nothing to take
	armedOnBoard(t, b, s.Identity())
	_, err = b.Answer(t.Context(), "user:alice", q.ID, "yes,\ntonight")
	require.NoError(t, err)
	w := a.answer(t)
	require.True(t, w.Wake)
	require.Equal(t, `bee: user:alice answered your question `+q.ID+` ("approve the migration?"): yes, tonight`, w.Line)

	// The bystander slept through the question and the answer; the asker,
	// armed again, hears nothing of it a second time.
	by.wakesFirstFor(t, b, "for the bystander")
	again := arm(t, s, WaitRequest{})
	armedOnBoard(t, b, s.Identity())
	again.wakesFirstFor(t, b, "for the asker")
}

func TestWakeLine_Answers(t *testing.T) {
	who := identity.ID("agent:lead#1a2b3c4d")
	rec := actions.Record{ID: "a-7", To: "user:alice", Title: "approve?", From: string(who), EndedBy: "user:alice", State: actions.Done, Result: "yes"}
	wake := func(r actions.Record) string {
		return WakeLine(who, actions.Notice{Kind: actions.NoticeOutcome, Record: r})
	}
	require.Equal(t, `bee: user:alice answered your question a-7 ("approve?"): yes`, wake(rec))

	rec.To, rec.EndedBy, rec.State, rec.Reason = actions.People, "user:bob", actions.Failed, "ask ops"
	require.Equal(t, `bee: user:bob declined your question a-7 ("approve?"): ask ops`, wake(rec))

	rec.State, rec.Reason = actions.Cancelled, "not now"
	require.Equal(t, `bee: action a-7 you posted ("approve?") was cancelled by user:bob: not now`, wake(rec))

	// A long answer is cut, and the line says where all of it is.
	rec.State, rec.Result = actions.Done, strings.Repeat("word ", 200)
	line := wake(rec)
	require.LessOrEqual(t, len(line), MaxWakeLine)
	require.True(t, strings.HasSuffix(line, `… (all of it: bee_await_action with ids ["a-7"])`), line)

	// An agent's action that a person cancelled, or one an agent did, reads
	// as before.
	rec = actions.Record{ID: "a-8", To: "reviewer", Title: "t", EndedBy: "agent:rev#00000001", State: actions.Done, Result: "ok"}
	require.Equal(t, `bee: action a-8 you posted ("t") is done by agent:rev#00000001: ok`, wake(rec))
}
