package bridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// An agent posts for another, awaits, and hears the failure and its reason;
// it cancels another action, whose holder's finish is then refused with
// the reason. Everything goes through MCP against a real board file.
func TestTools_OutcomesThroughMCP(t *testing.T) {
	b, err := board.Open(filepath.Join(t.TempDir(), "board.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	s, cs := connect(t, b, nil, nil)
	ctx := t.Context()
	worker := identity.ID("agent:worker#0000000b")
	require.NoError(t, b.Join(ctx, actions.Member{ID: worker, PID: os.Getpid()}))

	job := structured[actionResult](t, call(t, cs, ToolPost, map[string]any{"title": "build it", "body": "b", "to": "worker"})).Action
	p, err := b.Next(ctx, worker, "", time.Second)
	require.NoError(t, err)
	require.Equal(t, job.ID, p.Records[0].ID)

	awaited := make(chan recordsResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, mcpParams(ToolAwait, map[string]any{"ids": []string{job.ID}, "timeoutSeconds": 20}))
		if err != nil || res.IsError {
			t.Errorf("await: %v %v", err, res)
			awaited <- recordsResult{}
			return
		}
		var r recordsResult
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
	case <-time.After(15 * time.Second):
		t.Fatal("await did not return after the fail")
	}

	// Cancel an action someone holds: its finish is refused with the reason.
	other := structured[actionResult](t, call(t, cs, ToolPost, map[string]any{"title": "obsolete", "body": "b", "to": "worker"})).Action
	_, err = b.Next(ctx, worker, "", time.Second)
	require.NoError(t, err)
	res := call(t, cs, ToolCancel, map[string]any{"id": other.ID, "reason": "plans changed"})
	c := structured[actionResult](t, res).Action
	require.Equal(t, actions.Cancelled, c.State)
	require.Contains(t, text(res), "Its holder "+string(worker)+" is told")
	_, err = b.Finish(ctx, worker, other.ID, "done anyway")
	require.ErrorIs(t, err, actions.ErrEnded)
	require.ErrorContains(t, err, "plans changed")

	// The session fails what it holds.
	mine := structured[actionResult](t, call(t, cs, ToolPost, map[string]any{"title": "mine", "body": "b", "to": string(s.Identity())})).Action
	require.Len(t, structured[actions.Page](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5})).Records, 1)
	f := structured[actionResult](t, call(t, cs, ToolFail, map[string]any{"id": mine.ID, "reason": "no access"})).Action
	require.Equal(t, actions.Failed, f.State)

	// Refusals, each naming what was wrong.
	theirs, err := b.Post(ctx, "user:alice", "", "a person's", "")
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
			require.True(t, res.IsError, text(res))
			for _, w := range tc.want {
				require.Contains(t, text(res), w)
			}
		})
	}
}

// The hand-written record schema names exactly the fields actions.Record
// encodes, so the two cannot drift apart.
func TestSchema_RecordMatchesType(t *testing.T) {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal([]byte(recordSchema), &schema))
	var fields []string
	rt := reflect.TypeFor[actions.Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	var props []string
	for p := range schema.Properties {
		props = append(props, p)
	}
	require.ElementsMatch(t, fields, props)
	var states struct {
		Enum []actions.State `json:"enum"`
	}
	require.NoError(t, json.Unmarshal(schema.Properties["state"], &states))
	require.ElementsMatch(t, []actions.State{actions.Open, actions.Claimed, actions.Done, actions.Failed, actions.Cancelled}, states.Enum)
}

func mcpParams(name string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}
