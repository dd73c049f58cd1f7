package boardpage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/termtext"
)

// The plan view: ?plan=ID shows the plan the action ID belongs to (every
// action it waits for or that waits for it, transitively) as a graph drawn
// on the server in SVG, layered by depth from left to right, each edge
// running from a prerequisite to the action that waits for it, each node
// coloured by its state and linking to the action's row in the table
// below. It is part of the live section, so it is drawn again at every
// change of the board, with no reload.

// Sizes of the plan graph, in SVG user units (CSS pixels).
const (
	nodeW     = 220 // a node's width
	nodeH     = 54  // a node's height
	layerGap  = 64  // between two layers, where the edges run
	rowGap    = 16  // between two nodes of a layer
	graphPad  = 12  // around the graph
	titleRune = 30  // the most characters of a title a node shows
)

// planStates are the states the legend explains, in the order a plan
// goes through them.
var planStates = []actions.State{actions.Blocked, actions.Open, actions.Claimed, actions.Done, actions.Failed, actions.Cancelled}

// actionIDForm is what an action id looks like; ?plan= is used only when
// it has this form, so nothing else reaches a link or the board.
var actionIDForm = regexp.MustCompile(`^a-[1-9][0-9]{0,17}$`)

// cleanPlan returns ?plan= when it names an action id, else "".
func cleanPlan(v string) string {
	if actionIDForm.MatchString(v) {
		return v
	}
	return ""
}

// planView is what the plan view draws.
type planView struct {
	ID      string // the action asked about
	Summary string // "3 actions: 1 done, 2 blocked"
	Width   int
	Height  int
	Nodes   []planNode
	Edges   []planEdge
	Rows    []actionView // the plan's actions, in posting order
	Legend  []actions.State
	Err     string // the plan could not be read: say so instead
}

// A planNode is one action of the graph.
type planNode struct {
	ID     string
	State  actions.State
	Title  string // whole, for the tooltip
	Short  string // what fits in the node
	For    string
	X, Y   int
	Marked bool // the action asked about
	Depth  int
}

// TextX and TextY place a node's lines of text.
func (n planNode) TextX() int  { return n.X + 10 }
func (n planNode) Line1Y() int { return n.Y + 21 }
func (n planNode) Line2Y() int { return n.Y + 41 }

// W and H are every node's size.
func (planNode) W() int { return nodeW }
func (planNode) H() int { return nodeH }

// A planEdge is a prerequisite edge: After waits for Before.
type planEdge struct {
	Before, After string
	Met           bool   // Before is done
	Path          string // the SVG path, from Before's right side to After's left
}

// planOf reads the plan of id and lays it out.
func (s *Server) planOf(ctx context.Context, id string) *planView {
	g, err := s.board.Plan(ctx, id)
	if err != nil {
		msg := "The plan of " + id + " could not be read: " + err.Error() + "."
		if errors.Is(err, actions.ErrUnknownAction) {
			msg = "No action " + id + " on this board, so no plan to show."
		}
		return &planView{ID: id, Err: termtext.Line(msg)}
	}
	return layoutPlan(time.Now(), g, id)
}

// layoutPlan lays the plan g out as a layered graph: an action's layer
// (its column) is its depth, the length of the longest chain of
// prerequisites before it within the plan, and within a layer the actions
// sit in the order of the mean row of their prerequisites (posting order
// for ties and for the first layer), which keeps most edges short and
// uncrossed.
func layoutPlan(now time.Time, g actions.PlanGraph, mark string) *planView {
	v := &planView{ID: mark, Legend: planStates}
	index := make(map[string]int, len(g.Records))
	for i, r := range g.Records {
		index[r.ID] = i
	}
	prereqs := make([][]int, len(g.Records)) // node -> nodes it waits for
	var edges []actions.PlanEdge
	for _, e := range g.Edges {
		b, okB := index[e.Before]
		a, okA := index[e.After]
		if !okB || !okA || a == b {
			continue
		}
		prereqs[a] = append(prereqs[a], b)
		edges = append(edges, e)
	}
	depth := depths(prereqs)

	layers := [][]int{}
	for i, d := range depth {
		for len(layers) <= d {
			layers = append(layers, nil)
		}
		layers[d] = append(layers[d], i) // posting order within a layer
	}
	row := make([]float64, len(g.Records))
	for _, layer := range layers {
		mean := func(i int) float64 {
			if len(prereqs[i]) == 0 {
				return float64(i) // the first layer: posting order
			}
			sum := 0.0
			for _, p := range prereqs[i] {
				sum += row[p]
			}
			return sum / float64(len(prereqs[i]))
		}
		slices.SortStableFunc(layer, func(a, b int) int { return cmp.Compare(mean(a), mean(b)) })
		for k, i := range layer {
			row[i] = float64(k)
		}
	}

	tallest := 0
	for _, layer := range layers {
		tallest = max(tallest, len(layer))
	}
	v.Width = 2*graphPad + len(layers)*nodeW + max(0, len(layers)-1)*layerGap
	v.Height = 2*graphPad + tallest*nodeH + max(0, tallest-1)*rowGap
	pos := make([]planNode, len(g.Records))
	for d, layer := range layers {
		// Each layer is centred on the tallest one.
		top := graphPad + (tallest-len(layer))*(nodeH+rowGap)/2
		for k, i := range layer {
			r := shownRecord(g.Records[i])
			pos[i] = planNode{
				ID: r.ID, State: r.State, Title: r.Title, Short: cutRunes(r.Title, titleRune),
				For: actionView{Record: r}.For(), Marked: r.ID == mark, Depth: d,
				X: graphPad + d*(nodeW+layerGap), Y: top + k*(nodeH+rowGap),
			}
		}
	}
	for _, layer := range layers {
		for _, i := range layer {
			v.Nodes = append(v.Nodes, pos[i])
		}
	}
	for _, e := range edges {
		b, a := pos[index[e.Before]], pos[index[e.After]]
		x1, y1 := b.X+nodeW, b.Y+nodeH/2
		x2, y2 := a.X-4, a.Y+nodeH/2 // the arrowhead ends at the node
		bend := layerGap / 2
		v.Edges = append(v.Edges, planEdge{
			Before: b.ID, After: a.ID, Met: b.State == actions.Done,
			Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+bend, y1, x2-bend, y2, x2, y2),
		})
	}
	for _, r := range g.Records {
		v.Rows = append(v.Rows, actionOf(now, r))
	}
	v.Summary = planSummary(g.Records)
	return v
}

// depths returns each node's depth: 0 for a node that waits for nothing,
// else one more than the deepest node it waits for. A node on a cycle
// (which no board makes) is put after everything else.
func depths(prereqs [][]int) []int {
	n := len(prereqs)
	depth := make([]int, n)
	pending := make([]int, n)
	waiting := make([][]int, n) // node -> nodes that wait for it
	for i, ps := range prereqs {
		pending[i] = len(ps)
		for _, p := range ps {
			waiting[p] = append(waiting[p], i)
		}
	}
	queue := []int{}
	for i := range n {
		if pending[i] == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	deepest := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done++
		deepest = max(deepest, depth[i])
		for _, w := range waiting[i] {
			depth[w] = max(depth[w], depth[i]+1)
			if pending[w]--; pending[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	if done < n {
		for i := range n {
			if pending[i] > 0 {
				depth[i] = deepest + 1
			}
		}
	}
	return depth
}

// planSummary counts a plan's actions by state: "3 actions: 1 done, 2
// blocked".
func planSummary(recs []actions.Record) string {
	count := map[actions.State]int{}
	for _, r := range recs {
		count[r.State]++
	}
	var parts []string
	for _, st := range planStates {
		if n := count[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	noun := "actions"
	if len(recs) == 1 {
		noun = "action"
	}
	return fmt.Sprintf("%d %s: %s", len(recs), noun, strings.Join(parts, ", "))
}

// cutRunes cuts s to at most n characters, ending a cut one with "…".
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// inPlans returns the ids of the actions of records that belong to a plan
// of more than one action: those that wait for another, and those another
// waits for.
func inPlans(records []actions.Record) map[string]bool {
	in := map[string]bool{}
	for _, r := range records {
		if len(r.After) > 0 {
			in[r.ID] = true
			for _, p := range r.After {
				in[p] = true
			}
		}
	}
	return in
}
