package bridge

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// A claim the board no longer shows held when the wait would hand it over
// (this bridge was stopped past its lease; another bridge took the action
// and finished it) is not handed over: the wait goes on, and returns at
// its bound with nothing.
func TestWait_ClaimLostMeanwhileIsNotHandedOver(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var nexts atomic.Int32
		src := &actionstest.Source{
			NextFunc: func(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
				if nexts.Add(1) == 1 {
					time.Sleep(90 * time.Second) // stopped right after the claim, past the lease
					return actions.Page{Records: []actions.Record{{ID: "a-1", State: actions.Claimed, Holder: string(who)}}, Cursor: "c1"}, nil
				}
				select {
				case <-time.After(timeout):
				case <-ctx.Done():
					return actions.Page{}, ctx.Err()
				}
				return actions.Page{Records: []actions.Record{}, Cursor: after}, nil
			},
			GetFunc: func(_ context.Context, id string) (actions.Record, error) {
				return actions.Record{ID: id, State: actions.Done, Holder: "agent:other#0000000f"}, nil
			},
		}
		_, cs := connect(t, src, nil, nil)
		start := time.Now()
		page := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5}))
		require.Empty(t, page.Records, "a claim another bridge has finished is not handed over")
		require.Equal(t, 90*time.Second, time.Since(start), "the stalled Next took its time; nothing waits after it")
		require.Equal(t, int32(1), nexts.Load())
	})
}
