package bridge

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// plainArgs holds an argument of every plain kind, for the tools to come.
type plainArgs struct {
	Name     string   `json:"name"`
	Priority int      `json:"priority,omitzero"`
	Paths    []string `json:"paths,omitempty"`
	Shared   bool     `json:"shared,omitempty"`
}

// Each plain kind decodes its JSON and refuses the wrong kind by name, in
// words; null is absent for an optional argument.
func TestDecodeArgs_PlainKinds(t *testing.T) {
	t.Parallel()
	fields := argFields(reflect.TypeFor[plainArgs]())
	in, err := decodeArgs[plainArgs](fields, json.RawMessage(`{"name":"n","priority":3,"paths":["a/**"],"shared":true}`), DefaultWaitBounds)
	require.NoError(t, err)
	require.Equal(t, plainArgs{Name: "n", Priority: 3, Paths: []string{"a/**"}, Shared: true}, in)
	in, err = decodeArgs[plainArgs](fields, json.RawMessage(`{"name":"n","priority":null,"paths":null}`), DefaultWaitBounds)
	require.NoError(t, err)
	require.Equal(t, plainArgs{Name: "n"}, in)
	for _, tc := range []struct{ args, want string }{
		{`{}`, "argument name: is required (a string)"},
		{`{"name":1}`, "argument name: must be a string; got 1"},
		{`{"name":"n","priority":"3"}`, `argument priority: must be a JSON integer or null; got a string "3"`},
		{`{"name":"n","priority":2.5}`, "argument priority: must be a JSON integer or null; got 2.5"},
		{`{"name":"n","paths":"a"}`, `argument paths: must be an array of strings or null; got a string "a"`},
		{`{"name":"n","shared":"yes"}`, `argument shared: must be true or false or null; got a string "yes"`},
		{`{"name":"n","other":1}`, "argument other: unknown argument; this tool takes [name priority paths shared]"},
		{`[1]`, "argument arguments: must be a JSON object"},
	} {
		_, err := decodeArgs[plainArgs](fields, json.RawMessage(tc.args), DefaultWaitBounds)
		require.EqualError(t, err, tc.want, tc.args)
	}
}
