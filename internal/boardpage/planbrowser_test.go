package boardpage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// The plan view in a real Chromium: a plan posted with `bee post --plan`
// is drawn as a graph with each action's state, it is reached from any of
// the plan's actions on the board's own view, and it follows the plan live,
// with no reload, as steps end: a step done opens the next, a step failed
// cancels the one behind it.

// planNodes returns "id state" for each node of the plan graph.
func planNodes(t *testing.T, tab context.Context) []string {
	t.Helper()
	return eval[[]string](t, tab, `Array.from(document.querySelectorAll('#plan-graph .node')).map(n => n.dataset.id + ' ' + n.dataset.state)`)
}

// waitPlanNodes waits until the graph shows want.
func waitPlanNodes(t *testing.T, tab context.Context, want []string) {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(tab, 2*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#plan-graph .node')).map(n => n.dataset.id + ' ' + n.dataset.state)`))
		got = v
		return err == nil && equalStrings(v, want)
	}, 10*time.Second, 20*time.Millisecond, "the graph never showed %v (last %v)", want, got)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBrowser_PlanGraphLive(t *testing.T) {
	path := boardFile(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(`[
		{"key": "schema", "to": "db", "title": "Migrate the schema"},
		{"key": "api", "title": "Update the API", "after": ["schema"]},
		{"key": "load", "title": "Run the load test", "after": ["api"]}
	]`), 0o600))
	bee(t, path, "post", "--plan", plan)
	bee(t, path, "post", "Not in any plan")
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)

	// Every action of the plan links to the plan view; the lone one does not.
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		require.True(t, eval[bool](t, tab, `!!document.querySelector('tr[data-id="`+id+`"] a.plan-link')`), id)
	}
	require.False(t, eval[bool](t, tab, `!!document.querySelector('tr[data-id="a-4"] a.plan-link')`))
	within(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`tr[data-id="a-3"] a.plan-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#plan-graph`)),
	)
	waitLive(t, tab)
	require.Equal(t, "?plan=a-3", eval[string](t, tab, `location.search`))
	require.Equal(t, []string{"a-1 open", "a-2 blocked", "a-3 blocked"}, planNodes(t, tab))
	require.Equal(t, []string{"a-1 open Migrate the schema", "a-2 blocked Update the API", "a-3 blocked Run the load test"}, rows(t, tab),
		"the plan view lists the plan's actions, and only those")
	require.Equal(t, 2, eval[int](t, tab, `document.querySelectorAll('#plan-graph path.edge').length`))
	require.Equal(t, "Plan of a-3", eval[string](t, tab, `document.querySelector('#plan h2').firstChild.textContent.trim()`))
	// Each node is drawn left of what waits for it, in its state's colour,
	// the one the legend shows for that state.
	xs := eval[[]float64](t, tab, `['a-1','a-2','a-3'].map(id => document.querySelector('#plan-graph .node[data-id="'+id+'"] rect').getBBox().x)`)
	require.Less(t, xs[0], xs[1])
	require.Less(t, xs[1], xs[2])
	colour := func(id string) string {
		return eval[string](t, tab, `getComputedStyle(document.querySelector('#plan-graph .node[data-id="`+id+`"] rect')).stroke`)
	}
	legend := func(state string) string {
		return eval[string](t, tab, `getComputedStyle(document.querySelector('.legend .swatch.`+state+`')).borderTopColor`)
	}
	require.Equal(t, legend("open"), colour("a-1"))
	require.Equal(t, legend("blocked"), colour("a-2"))
	require.NotEqual(t, colour("a-1"), colour("a-2"))
	// A node links to its action's row below the graph.
	require.Equal(t, "#row-a-2", eval[string](t, tab, `document.querySelector('#plan-graph .node[data-id="a-2"]').getAttribute('href')`))
	require.True(t, eval[bool](t, tab, `!!document.querySelector('#plan tr#row-a-2')`))
	eval[bool](t, tab, `window.__sameLoad = true`) // a reload would lose it

	// The steps end in another process; the graph follows, live.
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	worker := identity.ID("agent:db#0000b00b")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: worker, PID: os.Getpid()}))
	defer b.Depart(context.WithoutCancel(t.Context()), worker)
	take := func(id string) {
		t.Helper()
		p, err := b.Next(t.Context(), worker, "", 5*time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		require.Equal(t, id, p.Records[0].ID)
	}
	take("a-1")
	waitPlanNodes(t, tab, []string{"a-1 claimed", "a-2 blocked", "a-3 blocked"})
	_, err = b.Finish(t.Context(), worker, "a-1", "migrated")
	require.NoError(t, err)
	waitPlanNodes(t, tab, []string{"a-1 done", "a-2 open", "a-3 blocked"})
	require.Equal(t, legend("done"), colour("a-1"))
	require.Equal(t, legend("open"), colour("a-2"))
	require.Equal(t, 1, eval[int](t, tab, `document.querySelectorAll('#plan-graph path.edge.met').length`), "the edge from a done step is drawn met")

	take("a-2")
	_, err = b.Fail(t.Context(), worker, "a-2", "the API is frozen")
	require.NoError(t, err)
	waitPlanNodes(t, tab, []string{"a-1 done", "a-2 failed", "a-3 cancelled"})
	require.Equal(t, legend("failed"), colour("a-2"))
	require.Equal(t, legend("cancelled"), colour("a-3"))
	require.Contains(t, eval[string](t, tab, `document.querySelector('#plan tr#row-a-3 td.outcome').textContent`), "prerequisite a-2 failed")
	require.Equal(t, "a-2 a-3", eval[string](t, tab, `Array.from(document.querySelectorAll('#plan-graph path.edge.broken')).map(p => p.dataset.before + ' ' + p.dataset.after).join()`),
		"the edge from the failed step is drawn broken")
	require.True(t, eval[bool](t, tab, `window.__sameLoad === true`), "the page was reloaded")
	require.Equal(t, "live", eval[string](t, tab, `document.getElementById('status').textContent`))
}
