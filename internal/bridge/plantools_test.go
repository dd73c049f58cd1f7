package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
)

// planSource is a fake board that takes plans and posts: it records what
// it was given and answers as a board would, each key becoming a-1, a-2,
// ... in the order given, blocked when it waits for anything.
type planSource struct {
	*actionstest.Source
	mu     sync.Mutex
	plans  [][]actions.PlanEntry
	drafts []actions.Draft
}

func newPlanSource() *planSource {
	s := &planSource{}
	s.Source = &actionstest.Source{
		PlanFunc: func(_ context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
			s.mu.Lock()
			s.plans = append(s.plans, plan)
			s.mu.Unlock()
			out := actions.PostedPlan{IDs: map[string]string{}}
			for i, e := range plan {
				out.IDs[e.Key] = fmt.Sprint("a-", i+1)
			}
			for i, e := range plan {
				r := actions.Record{ID: fmt.Sprint("a-", i+1), Seq: int64(i + 1), To: e.To, From: string(by), Title: e.Title, Body: e.Body,
					State: actions.Open, Priority: actions.DefaultPriority, PostedAt: time.Now()}
				for _, a := range e.After {
					if id, ok := out.IDs[a]; ok {
						a = id
					}
					r.After = append(r.After, a)
				}
				if len(r.After) > 0 {
					r.State, r.BlockedBy = actions.Blocked, r.After
				}
				out.Records = append(out.Records, r)
			}
			return out, nil
		},
		PostFunc: func(_ context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
			s.mu.Lock()
			s.drafts = append(s.drafts, d)
			s.mu.Unlock()
			r := actions.Record{ID: "a-9", Title: d.Title, From: string(by), State: actions.Open, After: d.After, PostedAt: time.Now()}
			if len(d.After) > 0 {
				r.State, r.BlockedBy = actions.Blocked, d.After
			}
			return r, nil
		},
	}
	return s
}

func (s *planSource) lastPlan() []actions.PlanEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plans[len(s.plans)-1]
}

func (s *planSource) lastDraft() actions.Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drafts[len(s.drafts)-1]
}

// A plan reaches the board as the model wrote it, and the answer maps each
// key to its id, names the last steps and tells the lead how to hear of
// the plan's end.
func TestPostPlan_PostsAndAnswers(t *testing.T) {
	t.Parallel()
	src := newPlanSource()
	_, cs := connect(t, src, nil, nil)
	res := call(t, cs, ToolPlan, json.RawMessage(`{"actions":[
		{"key":"schema","to":"db","title":"Migrate the schema","body":"b1","priority":0},
		{"key":"svc-a","title":"Update service A","body":"b2","after":["schema"],"priority":null},
		{"key":"svc-b","title":"Update service B","body":"b3","after":["schema","a-7"],"to":null},
		{"key":"load","title":"Run the load test","body":"b4","after":["svc-a","svc-b"],"priority":4}]}`))
	out := structured[planOut](t, res)

	zero, four := 0, 4
	require.Equal(t, []actions.PlanEntry{
		{Key: "schema", To: "db", Title: "Migrate the schema", Body: "b1", Priority: &zero},
		{Key: "svc-a", Title: "Update service A", Body: "b2", After: []string{"schema"}},
		{Key: "svc-b", Title: "Update service B", Body: "b3", After: []string{"schema", "a-7"}},
		{Key: "load", Title: "Run the load test", Body: "b4", After: []string{"svc-a", "svc-b"}, Priority: &four},
	}, src.lastPlan())
	require.Equal(t, map[string]string{"schema": "a-1", "svc-a": "a-2", "svc-b": "a-3", "load": "a-4"}, out.IDs)
	require.Equal(t, []string{"a-4"}, out.Last, "the one step nothing waits for")
	require.Len(t, out.Records, 4)
	require.Equal(t, actions.Blocked, out.Records[3].State)
	require.Equal(t, []string{"a-2", "a-3"}, out.Records[3].BlockedBy)
	require.Contains(t, out.Next, "bee wakes you as each step ends")
	require.Contains(t, out.Next, ToolAwait+" with ids [a-4]")

	// Two chains: each one's end is a last step.
	out = structured[planOut](t, call(t, cs, ToolPlan, json.RawMessage(`{"actions":[
		{"key":"x1","title":"x1","body":""},{"key":"x2","title":"x2","body":"","after":["x1"]},
		{"key":"y1","title":"y1","body":""}]}`)))
	require.Equal(t, []string{"a-2", "a-3"}, out.Last)
}

// Under a client bee cannot wake, the answer says how to hear of the plan
// instead.
func TestPostPlan_NextUnderCodex(t *testing.T) {
	t.Parallel()
	cs := connectAs(t, newPlanSource(), "codex-mcp-client", "0.171.0")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolPlan,
		Arguments: json.RawMessage(`{"actions":[{"key":"a","title":"A","body":"b"},{"key":"b","title":"B","body":"b","after":["a"]}]}`)})
	require.NoError(t, err)
	out := structured[planOut](t, res)
	require.Contains(t, out.Next, "bee cannot wake this Codex CLI session")
	require.Contains(t, out.Next, ToolAwait+" with ids [a-2]")
}

// A plan the tool cannot read is refused before the board sees it, naming
// the step and what is wrong with it.
func TestPostPlan_Refusals(t *testing.T) {
	t.Parallel()
	src := newPlanSource()
	_, cs := connect(t, src, nil, nil)
	for _, tc := range []struct {
		name, args string
		want       []string
	}{
		{"no actions", `{}`, []string{"argument actions", "is required"}},
		{"not an array", `{"actions":{"key":"a"}}`, []string{"argument actions", "array of steps"}},
		{"empty", `{"actions":[]}`, []string{"at least one step"}},
		{"not an object", `{"actions":["a"]}`, []string{"entry #1", "must be an object"}},
		{"unknown field", `{"actions":[{"key":"a","title":"t","body":"b","paths":["x"],"whom":"y","color":"z"}]}`, []string{"entry #1", "unknown field color"}},
		{"no body", `{"actions":[{"key":"a","title":"t","body":"b"},{"key":"b","title":"t"}]}`, []string{"entry #2", "body is required"}},
		{"no key", `{"actions":[{"title":"t","body":"b"}]}`, []string{"entry #1", "key is required"}},
		{"title a number", `{"actions":[{"key":"a","title":5,"body":"b"}]}`, []string{"entry #1", "title must be a string"}},
		{"priority a string", `{"actions":[{"key":"a","title":"t","body":"b","priority":"1"}]}`, []string{"entry #1", "priority must be a JSON integer", `"1"`}},
		{"priority out of range", `{"actions":[{"key":"a","title":"t","body":"b","priority":5}]}`, []string{"entry #1", "priority must be from 0", "got 5"}},
		{"after a string", `{"actions":[{"key":"a","title":"t","body":"b","after":"x"}]}`, []string{"entry #1", "after must be an array"}},
		{"too many", `{"actions":[` + strings.Repeat(`{"key":"a","title":"t","body":"b"},`, actions.MaxPlan) + `{"key":"a","title":"t","body":"b"}]}`,
			[]string{"holds 1001 steps; at most 1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := said(t, call(t, cs, ToolPlan, json.RawMessage(tc.args)))
			for _, w := range tc.want {
				require.Contains(t, got, w)
			}
			require.Contains(t, got, "Call "+ToolPlan+" again with argument actions")
		})
	}
	require.Empty(t, src.plans, "the board saw no plan")
}

// The board's refusal of a plan names every culprit, and the model is told
// that nothing was posted.
func TestPostPlan_BoardRefusalNamesEachCulprit(t *testing.T) {
	t.Parallel()
	b := openBoard(t)
	_, cs := connect(t, b, nil, nil)
	res := call(t, cs, ToolPlan, json.RawMessage(`{"actions":[
		{"key":"a","title":"A","body":"","after":["c"]},
		{"key":"b","title":"B","body":"","after":["a"]},
		{"key":"c","title":"C","body":"","after":["b"]},
		{"key":"d","title":"D","body":"","after":["nope"]},
		{"key":"d","title":"D again","body":""}]}`))
	got := said(t, res)
	for _, w := range []string{"nothing was posted", `"a" → "c" → "b"`, `"nope"`, `duplicate plan key`, "Nothing was posted. Fix every entry"} {
		require.Contains(t, got, w)
	}
	page, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.Empty(t, page.Records, "nothing was posted")
}

// bee_post_action takes after and priority; priority 0 is a priority, not
// its absence, and a blocked post says what it waits for.
func TestPost_AfterAndPriority(t *testing.T) {
	t.Parallel()
	src := newPlanSource()
	_, cs := connect(t, src, nil, nil)
	out := structured[actionOut](t, call(t, cs, ToolPost, json.RawMessage(`{"title":"t","body":"b","after":["a-1","a-2"],"priority":0}`)))
	d := src.lastDraft()
	require.Equal(t, []string{"a-1", "a-2"}, d.After)
	require.NotNil(t, d.Priority)
	require.Equal(t, 0, *d.Priority)
	require.Contains(t, out.Next, "blocked until a-1, a-2 are done")

	out = structured[actionOut](t, call(t, cs, ToolPost, json.RawMessage(`{"title":"t","body":"b","after":null,"priority":null}`)))
	d = src.lastDraft()
	require.Nil(t, d.After)
	require.Nil(t, d.Priority, "absent: the board's default")
	require.NotContains(t, out.Next, "blocked")

	for _, tc := range []struct{ args, want string }{
		{`{"title":"t","body":"b","priority":5}`, "argument priority: must be from 0 (most urgent) to 4 (default 2); got 5"},
		{`{"title":"t","body":"b","priority":-1}`, "got -1"},
		{`{"title":"t","body":"b","priority":"1"}`, `argument priority: must be a JSON integer from 0 (most urgent) to 4; got a string "1"`},
		{`{"title":"t","body":"b","priority":1.5}`, "argument priority"},
		{`{"title":"t","body":"b","after":"a-1"}`, "argument after: must be an array of strings"},
	} {
		require.Contains(t, said(t, call(t, cs, ToolPost, json.RawMessage(tc.args))), tc.want, tc.args)
	}
}

// On a real board: a post after an action that failed, or an unknown one,
// is refused naming it, with what to do; a post after an open one is
// blocked.
func TestPost_AfterOnABoard(t *testing.T) {
	t.Parallel()
	b := openBoard(t)
	_, cs := connect(t, b, nil, nil)
	first := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "first", "body": "b"})).Action
	second := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "second", "body": "b", "after": []string{first.ID}, "priority": 1})).Action
	require.Equal(t, actions.Blocked, second.State)
	require.Equal(t, []string{first.ID}, second.BlockedBy)
	require.Equal(t, 1, second.Priority)

	got := said(t, call(t, cs, ToolPost, map[string]any{"title": "third", "body": "b", "after": []string{"a-99"}}))
	require.Contains(t, got, "a-99")
	got = said(t, call(t, cs, ToolPost, map[string]any{"title": "third", "body": "b", "after": []string{"seven"}}))
	require.Contains(t, got, `"seven"`)
	require.Contains(t, got, "argument after")

	_, err := b.Cancel(t.Context(), "user:tester", first.ID, "not needed")
	require.NoError(t, err)
	got = said(t, call(t, cs, ToolPost, map[string]any{"title": "fourth", "body": "b", "after": []string{first.ID}}))
	require.Contains(t, got, first.ID)
	require.Contains(t, got, "cancelled")
	require.Contains(t, got, "could never open")
}

// The tool descriptions tell a lead when to post a plan, and how to hear
// of its end, under each client.
func TestPostPlan_Descriptions(t *testing.T) {
	t.Parallel()
	descs := func(name string) map[string]string {
		cs := connectAs(t, nil, name, "1")
		list, err := cs.ListTools(t.Context(), nil)
		require.NoError(t, err)
		out := map[string]string{}
		for _, tool := range list.Tools {
			out[tool.Name] = tool.Description
		}
		return out
	}
	cc := descs("claude-code")
	require.Contains(t, cc[ToolPlan], "instead of "+ToolPost+" when the work has several steps")
	require.Contains(t, cc[ToolPlan], ToolAwait+" with the ids in last")
	require.Contains(t, cc[ToolPlan], "bee wakes you as each step ends")
	require.Contains(t, cc[ToolPost], "use "+ToolPlan+" instead")
	codex := descs("codex-mcp-client")
	require.Contains(t, codex[ToolPlan], "bee cannot wake a Codex CLI session when a step ends")
	require.NotContains(t, codex[ToolPlan], "bee wakes you")
}
