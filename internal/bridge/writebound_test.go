package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// Every write a tool makes runs under writeBound, so that a board's server
// that falls silent cannot hold the call past it (a PostgreSQL board's
// write without a deadline could take 15 s + 5 s): the source sees a
// deadline at most writeBound away, on post, finish, release, fail, cancel
// and a plan's post.
func TestTools_WritesHaveADeadline(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen = map[string]time.Duration{} // the deadline each write saw, from its start; -1 for none
	)
	note := func(ctx context.Context, what string) {
		left := time.Duration(-1)
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		mu.Lock()
		defer mu.Unlock()
		seen[what] = left
	}
	rec := func(id string) actions.Record {
		return actions.Record{ID: id, Title: "job", State: actions.Open, PostedAt: time.Now()}
	}
	src := &actionstest.Source{
		PostFunc: func(ctx context.Context, _ actions.Poster, d actions.Draft) (actions.Record, error) {
			note(ctx, "post")
			return rec("a-1"), nil
		},
		FinishFunc: func(ctx context.Context, _ identity.ID, id, _ string) (actions.Record, error) {
			note(ctx, "finish")
			return rec(id), nil
		},
		ReleaseFunc: func(ctx context.Context, _ identity.ID, id string) (actions.Record, error) {
			note(ctx, "release")
			return rec(id), nil
		},
		FailFunc: func(ctx context.Context, _ identity.ID, id, _ string) (actions.Record, error) {
			note(ctx, "fail")
			return rec(id), nil
		},
		CancelFunc: func(ctx context.Context, _ actions.Poster, id, _ string) (actions.Record, error) {
			note(ctx, "cancel")
			return rec(id), nil
		},
		PlanFunc: func(ctx context.Context, _ actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
			note(ctx, "plan")
			out := actions.PostedPlan{IDs: map[string]string{}}
			for i, e := range plan {
				id := "a-" + string(rune('1'+i))
				out.IDs[e.Key] = id
				out.Records = append(out.Records, rec(id))
			}
			return out, nil
		},
	}
	_, cs := connect(t, src, nil, nil)
	call(t, cs, ToolPost, map[string]any{"title": "job", "body": "do it"})
	call(t, cs, ToolFinish, map[string]any{"id": "a-1", "result": "done"})
	call(t, cs, ToolRelease, map[string]any{"id": "a-1"})
	call(t, cs, ToolFail, map[string]any{"id": "a-1", "reason": "cannot"})
	call(t, cs, ToolCancel, map[string]any{"id": "a-1"})
	call(t, cs, ToolPlan, json.RawMessage(`{"actions":[{"key":"one","title":"first","body":"b"}]}`))

	mu.Lock()
	defer mu.Unlock()
	for _, what := range []string{"post", "finish", "release", "fail", "cancel", "plan"} {
		left, ok := seen[what]
		require.True(t, ok, "%s reached the source", what)
		require.Positive(t, left, "%s has a deadline", what)
		require.LessOrEqual(t, left, writeBound, "%s's deadline is writeBound away at most", what)
	}
}
