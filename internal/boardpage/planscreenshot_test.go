package boardpage

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// screenshotPlanEnv names the file TestScreenshotPlan writes the plan view
// to, for the README: BEE_SCREENSHOT_PLAN=$PWD/docs/plan-view.png go test
// -run TestScreenshotPlan ./internal/boardpage/.
const screenshotPlanEnv = "BEE_SCREENSHOT_PLAN"

// demoPlan posts a plan of six steps for three agents on b and moves it
// along: one step done, one claimed, one failed (which cancels the step
// behind it), the rest open or blocked.
func demoPlan(t *testing.T, b *board.Board) {
	t.Helper()
	ctx := t.Context()
	for _, m := range []actions.Member{{ID: reviewer, PID: os.Getpid()}, {ID: builder, PID: os.Getpid()}, {ID: docs, PID: os.Getpid()}} {
		require.NoError(t, b.Join(ctx, m))
	}
	one := 1
	_, err := b.PostPlan(ctx, alice, []actions.PlanEntry{
		{Key: "schema", To: builder.Agent(), Title: "Migrate the schema to v7", Priority: &one},
		{Key: "api", To: builder.Agent(), Title: "Update the API to the v7 schema", After: []string{"schema"}},
		{Key: "worker", To: reviewer.Agent(), Title: "Update the worker's queries", After: []string{"schema"}},
		{Key: "docs", To: docs.Agent(), Title: "Document the v7 fields", After: []string{"schema"}},
		{Key: "load", To: builder.Agent(), Title: "Run the load test against staging", After: []string{"api", "worker"}},
		{Key: "notes", To: docs.Agent(), Title: "Write the release notes", After: []string{"load", "docs"}},
	})
	require.NoError(t, err)
	claim := func(who identity.ID) actions.Record {
		p, err := b.Next(ctx, who, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		return p.Records[0]
	}
	_, err = b.Finish(ctx, builder, claim(builder).ID, "migrated in 4 min")
	require.NoError(t, err)
	claim(builder) // the API
	_, err = b.Fail(ctx, docs, claim(docs).ID, "the v7 field list is not final")
	require.NoError(t, err)
}

// TestScreenshotPlan draws the plan view of a plan in every state in the
// real browser and checks that it is an image of the whole page; with
// $BEE_SCREENSHOT_PLAN set it writes it there (docs/plan-view.png).
func TestScreenshotPlan(t *testing.T) {
	srv := demoServer(t, demoPlan)
	tab := newTab(t)
	within(t, tab, 10*time.Second, chromedp.EmulateViewport(1360, 820))
	signIn(t, tab, srv.LoginURL())
	origin := eval[string](t, tab, `location.origin`)
	within(t, tab, 10*time.Second, chromedp.Navigate(origin+"/?plan=a-5"), chromedp.WaitVisible(chromedp.CSS("#plan-graph")))
	require.Equal(t, []string{"a-1 done", "a-2 claimed", "a-3 open", "a-4 failed", "a-5 blocked", "a-6 cancelled"}, planNodesSorted(t, tab))
	fullScreenshot(t, tab, 1360, screenshotPlanEnv)
}

// planNodesSorted is planNodes in id order.
func planNodesSorted(t *testing.T, tab context.Context) []string {
	t.Helper()
	return eval[[]string](t, tab, `Array.from(document.querySelectorAll('#plan-graph .node')).map(n => n.dataset.id + ' ' + n.dataset.state).sort()`)
}
