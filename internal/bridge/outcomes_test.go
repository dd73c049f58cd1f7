package bridge

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// An agent posts for another, awaits, and hears the failure and its reason;
// it cancels another action, whose holder's finish is then refused with
// the reason. Everything goes through MCP against a real board file.
func TestTools_OutcomesThroughMCP(t *testing.T) {
	b := openBoard(t)
	s, cs := connect(t, b, nil, nil)
	ctx := t.Context()
	worker := identity.ID("agent:worker#0000000b")
	require.NoError(t, b.Join(ctx, actions.Member{ID: worker, PID: os.Getpid()}))

	job := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "build it", "body": "b", "to": "worker"})).Action
	// The job is on the board already: the claim's wait is a bound, not a
	// timeout under test (it failed at load 25 as a bare second).
	p, err := b.Next(ctx, worker, "", testtime.Bound(time.Second))
	require.NoError(t, err)
	require.NotEmpty(t, p.Records, "the worker's claim of %s", job.ID)
	require.Equal(t, job.ID, p.Records[0].ID)

	awaited := make(chan awaitOut, 1)
	go func() {
		res, err := cs.CallTool(ctx, mcpParams(ToolAwait, map[string]any{"ids": []string{job.ID}, "timeoutSeconds": 20}))
		if err != nil || res.IsError {
			t.Errorf("await: %v %v", err, res)
			awaited <- awaitOut{}
			return
		}
		var r awaitOut
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &r)
		awaited <- r
	}()
	_, err = b.Fail(ctx, worker, job.ID, "the compiler is missing")
	require.NoError(t, err)
	select {
	case r := <-awaited:
		require.Len(t, r.Records, 1)
		require.Equal(t, actions.Failed, r.Records[0].State)
		require.Equal(t, "the compiler is missing", r.Records[0].Reason)
	case <-time.After(testtime.Bound(15 * time.Second)):
		t.Fatal("await did not return after the fail")
	}

	// Cancel an action someone holds: its finish is refused with the reason.
	other := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "obsolete", "body": "b", "to": "worker"})).Action
	_, err = b.Next(ctx, worker, "", testtime.Bound(time.Second))
	require.NoError(t, err)
	res := call(t, cs, ToolCancel, map[string]any{"id": other.ID, "reason": "plans changed"})
	c := structured[actionOut](t, res)
	require.Equal(t, actions.Cancelled, c.Action.State)
	require.Contains(t, c.Next, "Its holder "+string(worker)+" is told")
	_, err = b.Finish(ctx, worker, other.ID, "done anyway")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "plans changed")

	// The session fails what it holds.
	mine := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "mine", "body": "b", "to": string(s.Identity())})).Action
	require.Len(t, structured[actions.Page](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5})).Records, 1)
	f := structured[actionOut](t, call(t, cs, ToolFail, map[string]any{"id": mine.ID, "reason": "no access"})).Action
	require.Equal(t, actions.Failed, f.State)

	// Refusals, each naming what was wrong.
	theirs, err := b.Post(ctx, "user:alice", actions.Draft{Title: "a person's"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, tool string
		args       string
		want       []string
	}{
		{"fail without reason", ToolFail, `{"id":"` + mine.ID + `"}`, []string{"argument reason", "required"}},
		{"fail blank reason", ToolFail, `{"id":"` + mine.ID + `","reason":"  "}`, []string{"argument reason", "why"}},
		{"fail ended", ToolFail, `{"id":"` + mine.ID + `","reason":"x"}`, []string{mine.ID, "failed", "has ended"}},
		{"fail not held", ToolFail, `{"id":"` + theirs.ID + `","reason":"x"}`, []string{theirs.ID, "not held"}},
		{"cancel not poster", ToolCancel, `{"id":"` + theirs.ID + `"}`, []string{theirs.ID, "user:alice", "poster"}},
		{"cancel unknown", ToolCancel, `{"id":"a-999"}`, []string{"a-999", "unknown action"}},
		{"cancel reason number", ToolCancel, `{"id":"a-1","reason":5}`, []string{"argument reason"}},
		{"await no ids", ToolAwait, `{}`, []string{"argument ids", "required"}},
		{"await ids string", ToolAwait, `{"ids":"a-1"}`, []string{"argument ids", "array"}},
		{"await ids empty", ToolAwait, `{"ids":[]}`, []string{"argument ids", "at least one"}},
		{"await ids numbers", ToolAwait, `{"ids":[1]}`, []string{"argument ids"}},
		{"await unknown id", ToolAwait, `{"ids":["a-1","a-999"],"timeoutSeconds":1}`, []string{"a-999", "unknown action"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, json.RawMessage(tc.args))
			for _, w := range tc.want {
				require.Contains(t, said(t, res), w)
			}
		})
	}
}

// The schemas come from the types, with the contract's bounds: what the
// model reads of timeoutSeconds and cursor, and nothing an answer must
// carry (a refusal carries only its guidance).
func TestSchema_FromTypes(t *testing.T) {
	t.Parallel()
	_, cs := connect(t, nil, nil, nil)
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	schemas := map[string]map[string]any{}
	for _, tool := range list.Tools {
		raw, err := json.Marshal(map[string]any{"in": tool.InputSchema, "out": tool.OutputSchema})
		require.NoError(t, err)
		var both struct{ In, Out map[string]any }
		require.NoError(t, json.Unmarshal(raw, &both))
		require.Equal(t, "object", both.In["type"], tool.Name)
		require.Equal(t, false, both.In["additionalProperties"], "%s refuses unknown arguments", tool.Name)
		require.NotContains(t, both.Out, "required", "%s: a refusal carries only guidance", tool.Name)
		require.Contains(t, both.Out["properties"], "next", tool.Name)
		require.Contains(t, both.Out["properties"], "error", tool.Name)
		schemas[tool.Name] = both.In
	}
	props := func(tool string) map[string]any { return schemas[tool]["properties"].(map[string]any) }
	for _, tool := range []string{ToolWait, ToolAwait} {
		secs := props(tool)["timeoutSeconds"].(map[string]any)
		require.Equal(t, []any{"integer", "null"}, secs["type"], tool)
		require.Equal(t, 1.0, secs["minimum"], tool)
		require.Equal(t, DefaultWaitBounds.Max.Seconds(), secs["maximum"], tool)
		require.Equal(t, DefaultWaitBounds.Default.Seconds(), secs["default"], tool)
	}
	require.Equal(t, []any{"string", "null"}, props(ToolWait)["cursor"].(map[string]any)["type"])
	require.Equal(t, []any{"string", "null"}, props(ToolList)["since"].(map[string]any)["type"])
	require.Equal(t, "string", props(ToolPost)["title"].(map[string]any)["type"])
	require.ElementsMatch(t, []any{"title", "body"}, schemas[ToolPost]["required"])
	ids := props(ToolAwait)["ids"].(map[string]any)
	require.Equal(t, float64(maxAwaitIDs), ids["maxItems"])
}

func mcpParams(name string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}
