package bridge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// TestTools_BoardRefusalsByName drives every board tool's refusals through
// MCP against a real board file: each says exactly what was wrong.
func TestTools_BoardRefusalsByName(t *testing.T) {
	b := openBoard(t)
	s, cs := connect(t, b, nil, nil)
	me := string(s.Identity())

	// Someone else's claim, and a done action.
	other := "agent:other#0000000a"
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: "agent:other#0000000a"}))
	theirs, err := b.Post(t.Context(), "user:tester", actions.Draft{To: other, Title: "theirs"})
	require.NoError(t, err)
	p, err := b.Next(t.Context(), "agent:other#0000000a", "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	mine := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "mine", "body": "b", "to": me})).Action
	claimed := structured[actions.Page](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5}))
	require.Len(t, claimed.Records, 1)
	require.Equal(t, mine.ID, claimed.Records[0].ID)
	done := structured[actionOut](t, call(t, cs, ToolFinish, map[string]any{"id": mine.ID, "result": "ok"})).Action
	require.Equal(t, actions.Done, done.State)
	open := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "open one", "body": "b"})).Action

	for _, tc := range []struct {
		name, tool string
		args       string
		want       []string
	}{
		{"empty title", ToolPost, `{"title":"  ","body":"b"}`, []string{"argument title", "empty"}},
		{"title too long", ToolPost, `{"title":"` + strings.Repeat("x", 201) + `","body":"b"}`, []string{"title"}},
		{"bad to", ToolPost, `{"title":"t","body":"b","to":"not a name!"}`, []string{"not a name!"}},
		{"finish unknown", ToolFinish, `{"id":"a-999"}`, []string{"a-999", "unknown action"}},
		{"finish someone else's", ToolFinish, `{"id":"` + theirs.ID + `"}`, []string{theirs.ID, other, "not held"}},
		{"finish done", ToolFinish, `{"id":"` + mine.ID + `"}`, []string{mine.ID, "was finished by", "has ended"}},
		{"finish open", ToolFinish, `{"id":"` + open.ID + `"}`, []string{open.ID, "not held"}},
		{"release someone else's", ToolRelease, `{"id":"` + theirs.ID + `"}`, []string{theirs.ID, other}},
		{"release done", ToolRelease, `{"id":"` + mine.ID + `"}`, []string{mine.ID, "was finished by", "has ended"}},
		{"release unknown", ToolRelease, `{"id":"nope"}`, []string{"nope", "unknown action"}},
		{"wait foreign cursor", ToolWait, `{"timeoutSeconds":1,"cursor":"0"}`, []string{"cursor"}},
		{"list foreign cursor", ToolList, `{"since":"0"}`, []string{"argument since"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, json.RawMessage(tc.args))
			for _, w := range tc.want {
				require.Contains(t, said(t, res), w)
			}
		})
	}
}
