package bridge

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
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
			require.True(t, res.IsError, text(res))
			for _, w := range tc.want {
				require.Contains(t, text(res), w)
			}
		})
	}
}

// Every hand-written output schema describes exactly what its Go type
// encodes (the same properties, of the same JSON types, required only
// where the field is always encoded), so the two cannot drift apart.
func TestSchema_OutputsMatchTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		schema json.RawMessage
		typ    reflect.Type
	}{
		{"record", json.RawMessage(recordSchema), reflect.TypeFor[actions.Record]()},
		{ToolWait + " page", pageOutputSchema, reflect.TypeFor[actions.Page]()},
		{"records", recordsOutputSchema, reflect.TypeFor[recordsResult]()},
		{"action", actionOutputSchema, reflect.TypeFor[actionResult]()},
		{ToolWhoami, whoamiOutputSchema, reflect.TypeFor[Whoami]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var schema jsonSchema
			require.NoError(t, json.Unmarshal(tc.schema, &schema))
			matchSchema(t, tc.name, schema, tc.typ, false)
		})
	}
	// The states a record's schema allows are the states there are.
	var schema jsonSchema
	require.NoError(t, json.Unmarshal([]byte(recordSchema), &schema))
	var states []actions.State
	require.NoError(t, json.Unmarshal(schema.Properties["state"].Enum, &states))
	require.ElementsMatch(t, []actions.State{actions.Open, actions.Claimed, actions.Done, actions.Failed, actions.Cancelled}, states)
}

// jsonSchema is the part of a JSON schema the output schemas use.
type jsonSchema struct {
	Type       json.RawMessage       `json:"type"` // "string" or ["integer", "null"]
	Properties map[string]jsonSchema `json:"properties"`
	Required   []string              `json:"required"`
	Items      *jsonSchema           `json:"items"`
	Enum       json.RawMessage       `json:"enum"`
}

// matchSchema holds schema against what encoding/json makes of typ at
// path. nullable says the value may encode as null (a pointer without
// omitempty).
func matchSchema(t *testing.T, path string, schema jsonSchema, typ reflect.Type, nullable bool) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		matchSchema(t, path, schema, typ.Elem(), nullable)
		return
	}
	want := jsonType(typ)
	var types []string
	if err := json.Unmarshal(schema.Type, &types); err != nil {
		var one string
		require.NoError(t, json.Unmarshal(schema.Type, &one), "%s: type", path)
		types = []string{one}
	}
	if nullable {
		require.ElementsMatch(t, []string{want, "null"}, types, "%s: a value that may be null", path)
	} else {
		require.Equal(t, []string{want}, types, "%s", path)
	}
	switch want {
	case "array":
		require.NotNil(t, schema.Items, "%s: items", path)
		matchSchema(t, path+"[]", *schema.Items, typ.Elem(), false)
	case "object":
		always := map[string]bool{}
		var fields []string
		for f := range typ.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			omit := strings.Contains(opts, "omitempty")
			fields = append(fields, name)
			always[name] = !omit
			prop, ok := schema.Properties[name]
			require.True(t, ok, "%s: field %s has no property in the schema", path, name)
			matchSchema(t, path+"."+name, prop, f.Type, f.Type.Kind() == reflect.Pointer && !omit)
		}
		var props []string
		for p := range schema.Properties {
			props = append(props, p)
		}
		require.ElementsMatch(t, fields, props, "%s: properties", path)
		for _, r := range schema.Required {
			require.True(t, always[r], "%s: %s is required but not always encoded (omitempty)", path, r)
		}
	}
}

// jsonType is the JSON type encoding/json gives a value of typ.
func jsonType(typ reflect.Type) string {
	if typ == reflect.TypeFor[time.Time]() {
		return "string"
	}
	switch typ.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "unknown " + typ.String()
}

func mcpParams(name string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}
