package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
)

// A list answer is bounded, however large the page the board returns: its
// records' long texts are cut, each record says so, and the answer says
// how to see the rest.
func TestList_Bounded(t *testing.T) {
	t.Parallel()
	page := func(n, body int) actions.Page {
		p := actions.Page{Records: []actions.Record{}, Cursor: "c-end"}
		for i := range n {
			p.Records = append(p.Records, actions.Record{ID: fmt.Sprint("a-", i+1), Seq: int64(i + 1), From: "user:alice",
				Title: "t", Body: strings.Repeat("é", body/2), State: actions.Open, PostedAt: time.Now()})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		page actions.Page
		cut  bool
	}{
		{"twenty of 64 KiB", page(20, 64<<10), true},
		{"one of 10 MB", page(1, 10<<20), true},
		{"a hundred of 10 KiB", page(100, 10<<10), true},
		{"a few small", page(3, 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &actionstest.Source{ListFunc: func(context.Context, actions.Cursor) (actions.Page, error) { return tc.page, nil }}
			_, cs := connect(t, src, nil, nil)
			res := call(t, cs, ToolList, nil)
			raw, err := json.Marshal(res.StructuredContent)
			require.NoError(t, err)
			require.LessOrEqual(t, len(raw), maxListAnswer)
			t.Logf("%s: answer %d bytes", tc.name, len(raw))
			out := structured[listOut](t, res)
			require.Len(t, out.Records, len(tc.page.Records), "no record is dropped: the cursor is after the last")
			require.Equal(t, tc.page.Cursor, out.Cursor)
			for i, r := range out.Records {
				require.Equal(t, tc.cut, r.Cut, r.ID)
				require.Equal(t, tc.page.Records[i].ID, r.ID)
				require.True(t, strings.HasPrefix(tc.page.Records[i].Body, strings.TrimSuffix(r.Body, "…")), "a cut keeps the start")
			}
			require.Contains(t, out.Next, "since")
			require.Contains(t, out.Next, ToolWait, "says where the whole text is")
		})
	}
}
