package boardpage

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// diamond is a plan of five: a-1 first; a-2 and a-3 after it; a-4 after
// both; a-5 after a-1 and a-4 (an edge that skips a layer).
func diamond() actions.PlanGraph {
	now := time.Now()
	rec := func(id string, st actions.State, after ...string) actions.Record {
		return actions.Record{ID: id, State: st, Title: "step " + id, From: "user:ann", After: after, PostedAt: now}
	}
	return actions.PlanGraph{
		Records: []actions.Record{
			rec("a-1", actions.Done), rec("a-2", actions.Claimed, "a-1"), rec("a-3", actions.Open, "a-1"),
			rec("a-4", actions.Blocked, "a-2", "a-3"), rec("a-5", actions.Blocked, "a-1", "a-4"),
		},
		Edges: []actions.PlanEdge{
			{Before: "a-1", After: "a-2"}, {Before: "a-1", After: "a-3"}, {Before: "a-2", After: "a-4"},
			{Before: "a-3", After: "a-4"}, {Before: "a-1", After: "a-5"}, {Before: "a-4", After: "a-5"},
		},
	}
}

// The layout puts each action in the column of its depth, keeps nodes
// apart, runs every edge from its prerequisite's right side forward to its
// dependent's left side, and marks what is met.
func TestLayoutPlan_Layers(t *testing.T) {
	v := layoutPlan(time.Now(), diamond(), "a-4")
	nodes := map[string]planNode{}
	for _, n := range v.Nodes {
		nodes[n.ID] = n
	}
	require.Len(t, nodes, 5)
	wantDepth := map[string]int{"a-1": 0, "a-2": 1, "a-3": 1, "a-4": 2, "a-5": 3}
	for id, d := range wantDepth {
		require.Equal(t, d, nodes[id].Depth, id)
		require.Equal(t, graphPad+d*(nodeW+layerGap), nodes[id].X, id)
	}
	require.True(t, nodes["a-4"].Marked)
	require.False(t, nodes["a-1"].Marked)
	// Two in one layer do not overlap, and everything is inside the graph.
	a2, a3 := nodes["a-2"], nodes["a-3"]
	require.GreaterOrEqual(t, abs(a2.Y-a3.Y), nodeH+rowGap)
	for _, n := range v.Nodes {
		require.GreaterOrEqual(t, n.X, graphPad)
		require.GreaterOrEqual(t, n.Y, graphPad)
		require.LessOrEqual(t, n.X+nodeW, v.Width-graphPad)
		require.LessOrEqual(t, n.Y+nodeH, v.Height-graphPad)
	}
	require.Equal(t, 4*nodeW+3*layerGap+2*graphPad, v.Width)
	// Layer 1 holds a-2, a-3 and the slot a-1 → a-5 passes through.
	require.Equal(t, 3*nodeH+2*rowGap+2*graphPad, v.Height)

	require.Len(t, v.Edges, 6)
	num := regexp.MustCompile(`-?\d+`)
	for _, e := range v.Edges {
		require.Regexp(t, `^M-?\d+ -?\d+( C-?\d+ -?\d+ -?\d+ -?\d+ -?\d+ -?\d+( L-?\d+ -?\d+)?)+$`, e.Path)
		var p []int
		for _, f := range num.FindAllString(e.Path, -1) {
			var k int
			_, err := fmt.Sscan(f, &k)
			require.NoError(t, err)
			p = append(p, k)
		}
		b, a := nodes[e.Before], nodes[e.After]
		require.Equal(t, []int{b.X + nodeW, b.Y + nodeH/2}, p[:2], "starts at the prerequisite's right side: %+v", e)
		require.Equal(t, []int{a.X - 4, a.Y + nodeH/2}, p[len(p)-2:], "ends at the dependent's left side, before the arrowhead: %+v", e)
		require.Equal(t, b.State == actions.Done, e.Met, "%+v", e)
		require.False(t, e.Broken, "nothing failed: %+v", e)
		// Across a layer between, the edge runs level, and under no node.
		for _, m := range regexp.MustCompile(`C-?\d+ -?\d+ -?\d+ -?\d+ (-?\d+) (-?\d+) L(-?\d+) (-?\d+)`).FindAllStringSubmatch(e.Path, -1) {
			require.Equal(t, m[2], m[4], "level across: %s", e.Path)
			for _, n := range v.Nodes {
				if fmt.Sprint(n.X) == m[1] {
					var ly int
					_, _ = fmt.Sscan(m[2], &ly)
					require.False(t, ly >= n.Y && ly <= n.Y+nodeH, "the edge %s→%s runs under %s", e.Before, e.After, n.ID)
				}
			}
		}
	}
	long := regexp.MustCompile(` L`).FindAllString(edgeOf(v, "a-1", "a-5").Path, -1)
	require.Len(t, long, 2, "a-1 → a-5 crosses two layers")
	require.Equal(t, "5 actions: 2 blocked, 1 open, 1 claimed, 1 done", v.Summary)
	require.Len(t, v.Rows, 5)
	require.Equal(t, "a-1", v.Rows[0].ID, "the table lists them in posting order")
}

// Within a layer, actions sit in the order of their prerequisites' rows,
// so that two parallel chains do not cross.
func TestLayoutPlan_ChainsDoNotCross(t *testing.T) {
	now := time.Now()
	g := actions.PlanGraph{
		Records: []actions.Record{
			{ID: "a-1", State: actions.Open, PostedAt: now}, {ID: "a-2", State: actions.Open, PostedAt: now},
			// Posted in the other order: b's second step first.
			{ID: "a-3", State: actions.Blocked, After: []string{"a-2"}, PostedAt: now},
			{ID: "a-4", State: actions.Blocked, After: []string{"a-1"}, PostedAt: now},
		},
		Edges: []actions.PlanEdge{{Before: "a-2", After: "a-3"}, {Before: "a-1", After: "a-4"}},
	}
	v := layoutPlan(now, g, "a-1")
	y := map[string]int{}
	for _, n := range v.Nodes {
		y[n.ID] = n.Y
	}
	require.Less(t, y["a-1"], y["a-2"])
	require.Less(t, y["a-4"], y["a-3"], "a-4 follows a-1, so it sits level with it")
	require.Equal(t, y["a-1"], y["a-4"])
	require.Equal(t, y["a-2"], y["a-3"])
}

// A plan of one action, and edges naming actions outside the plan, draw
// without trouble.
func TestLayoutPlan_Degenerate(t *testing.T) {
	now := time.Now()
	one := layoutPlan(now, actions.PlanGraph{Records: []actions.Record{{ID: "a-1", State: actions.Open, PostedAt: now}}}, "a-1")
	require.Len(t, one.Nodes, 1)
	require.Empty(t, one.Edges)
	require.Equal(t, nodeW+2*graphPad, one.Width)
	stray := layoutPlan(now, actions.PlanGraph{
		Records: []actions.Record{{ID: "a-1", State: actions.Open, PostedAt: now}},
		Edges:   []actions.PlanEdge{{Before: "a-9", After: "a-1"}, {Before: "a-1", After: "a-1"}},
	}, "a-1")
	require.Len(t, stray.Nodes, 1)
	require.Empty(t, stray.Edges)
}

// depths puts a node on a cycle (which no board makes) after the rest
// rather than looping.
func TestDepths_Cycle(t *testing.T) {
	require.Equal(t, []int{0, 1, 2, 2}, depths([][]int{nil, {0}, {3}, {2}}))
	require.Equal(t, []int{0, 1, 1, 2}, depths([][]int{nil, {0}, {0}, {1, 2}}))
}

// The plan view draws each node with its state, links it to its row, and
// escapes the board's text in the SVG as everywhere.
func TestView_PlanRendered(t *testing.T) {
	g := diamond()
	g.Records[2].Title = `<script>alert(1)</script> and a title far too long to fit in one node of the graph`
	v := &pageView{CSRF: "tok", Plan: layoutPlan(time.Now(), g, "a-4")}
	v.fill(time.Now(), g.Records, nil)
	var buf bytes.Buffer
	require.NoError(t, templates.ExecuteTemplate(&buf, "live", v))
	html := buf.String()
	for _, r := range g.Records {
		require.Regexp(t, `<a href="#row-`+r.ID+`" class="node `+string(r.State)+`[^"]*" data-id="`+r.ID+`" data-state="`+string(r.State)+`"`, html)
		require.Contains(t, html, `<tr id="row-`+r.ID+`" data-id="`+r.ID+`" data-state="`+string(r.State)+`">`)
	}
	require.Contains(t, html, `class="node blocked marked"`)
	require.Equal(t, 6, strings.Count(html, `marker-end="url(#plan-arrow)"`))
	require.NotContains(t, html, "<script>alert")
	short := cutRunes(g.Records[2].Title, titleRune)
	require.Equal(t, titleRune, utf8.RuneCountInString(short))
	require.True(t, strings.HasSuffix(short, "…"))
	require.Contains(t, html, `class="node-title">`+template.HTMLEscapeString(short)+`</text>`, "cut to fit, and escaped")
	for _, st := range planStates {
		require.Contains(t, html, `<span class="swatch `+string(st)+`"></span>`+string(st))
	}
	// Cancel forms bring the person back to the plan.
	require.Contains(t, html, `<input type="hidden" name="plan" value="a-4">`)
	require.NotContains(t, html, `data-op="readdress-`, "the plan view has no re-address")
}

// The board's own views link each action of a plan to the plan view, and
// no other.
func TestView_PlanLinks(t *testing.T) {
	g := diamond()
	lone := actions.Record{ID: "a-6", State: actions.Open, Title: "alone", PostedAt: time.Now()}
	html := render(t, "", append(g.Records, lone), nil)
	for _, id := range []string{"a-1", "a-2", "a-3", "a-4", "a-5"} {
		require.Contains(t, html, `<a class="plan-link" href="/?plan=`+id+`"`, id)
	}
	require.NotContains(t, html, `href="/?plan=a-6"`)
	require.Contains(t, html, `data-op="readdress-a-4"`, "a blocked action can be re-addressed")
	require.Contains(t, html, `data-op="cancel-a-4"`)
}

// ?plan= is used only when it names an action id.
func TestCleanPlan(t *testing.T) {
	for in, want := range map[string]string{"a-1": "a-1", "a-123": "a-123", "": "", "a-0": "", "a-01": "", "b-1": "", "a-1&x=1": "", "javascript:x": "", "a-1\n": ""} {
		require.Equal(t, want, cleanPlan(in), "%q", in)
	}
}

func edgeOf(v *planView, before, after string) planEdge {
	for _, e := range v.Edges {
		if e.Before == before && e.After == after {
			return e
		}
	}
	return planEdge{}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
