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
	nodeW     = 184 // a node's width
	nodeH     = 54  // a node's height
	layerGap  = 50  // between two layers, where the edges run
	rowGap    = 16  // between two nodes of a layer
	graphPad  = 12  // around the graph
	titleRune = 24  // the most characters of a title a node shows
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
	Broken        bool   // Before failed or was cancelled: After never opens
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
// prerequisites before it within the plan. An edge that spans several
// layers runs through a hidden slot in each layer between, so that it
// never passes under a node. Within a layer, slots sit in the order of the
// mean row of what they wait for (posting order for ties and for the
// first layer), which keeps most edges short and uncrossed.
func layoutPlan(now time.Time, g actions.PlanGraph, mark string) *planView {
	v := &planView{ID: mark, Legend: planStates}
	n := len(g.Records)
	edges, prereqs := planEdges(g)
	l := slotsOf(depths(prereqs), edges)
	l.order()
	v.Width, v.Height = l.place()
	for _, layer := range l.layers {
		for _, i := range layer {
			if i >= n {
				continue // a hidden slot
			}
			r := shownRecord(g.Records[i])
			v.Nodes = append(v.Nodes, planNode{
				ID: r.ID, State: r.State, Title: r.Title, Short: cutRunes(r.Title, titleRune),
				For: actionView{Record: r}.For(), Marked: r.ID == mark, Depth: l.depth[i], X: l.x[i], Y: l.y[i],
			})
		}
	}
	for k, e := range edges {
		b, a := e[0], e[1]
		v.Edges = append(v.Edges, planEdge{
			Before: shownRecord(g.Records[b]).ID, After: shownRecord(g.Records[a]).ID,
			Met:    g.Records[b].State == actions.Done,
			Broken: g.Records[b].State == actions.Failed || g.Records[b].State == actions.Cancelled,
			Path:   edgePath(l.paths[k], l.x, l.y),
		})
	}
	for _, r := range g.Records {
		v.Rows = append(v.Rows, actionOf(now, r))
	}
	v.Summary = planSummary(g.Records)
	return v
}

// planEdges is g's edges between its records, by index in g.Records
// (before, after), and each record's prerequisites within the plan.
func planEdges(g actions.PlanGraph) (edges [][2]int, prereqs [][]int) {
	index := make(map[string]int, len(g.Records))
	for i, r := range g.Records {
		index[r.ID] = i
	}
	prereqs = make([][]int, len(g.Records))
	for _, e := range g.Edges {
		b, okB := index[e.Before]
		a, okA := index[e.After]
		if !okB || !okA || a == b {
			continue
		}
		prereqs[a] = append(prereqs[a], b)
		edges = append(edges, [2]int{b, a})
	}
	return edges, prereqs
}

// A slotLayout places a plan's slots: its actions (0..n-1), then the
// hidden slots that carry long edges across the layers between.
type slotLayout struct {
	depth  []int   // slot -> layer
	waits  [][]int // slot -> slots it hangs from
	paths  [][]int // edge -> the slots it runs through
	layers [][]int // layer -> its slots, top to bottom
	x, y   []int   // slot -> position
}

// slotsOf makes the slots of actions at depth and of the hidden slots of
// edges that span several layers.
func slotsOf(depth []int, edges [][2]int) *slotLayout {
	l := &slotLayout{depth: slices.Clone(depth), waits: make([][]int, len(depth)), paths: make([][]int, len(edges))}
	for k, e := range edges {
		b, a := e[0], e[1]
		path := []int{b}
		for d := depth[b] + 1; d < depth[a]; d++ {
			l.depth = append(l.depth, d)
			l.waits = append(l.waits, []int{path[len(path)-1]})
			path = append(path, len(l.depth)-1)
		}
		l.waits[a] = append(l.waits[a], path[len(path)-1])
		l.paths[k] = append(path, a)
	}
	return l
}

// order sorts each layer's slots by the mean row of what they hang from
// (posting order in the first layer and for ties).
func (l *slotLayout) order() {
	for i, d := range l.depth {
		for len(l.layers) <= d {
			l.layers = append(l.layers, nil)
		}
		l.layers[d] = append(l.layers[d], i) // posting order, hidden slots last
	}
	row := make([]float64, len(l.depth))
	for _, layer := range l.layers {
		mean := func(i int) float64 {
			if len(l.waits[i]) == 0 {
				return float64(i) // the first layer: posting order
			}
			sum := 0.0
			for _, p := range l.waits[i] {
				sum += row[p]
			}
			return sum / float64(len(l.waits[i]))
		}
		slices.SortStableFunc(layer, func(a, b int) int { return cmp.Compare(mean(a), mean(b)) })
		for k, i := range layer {
			row[i] = float64(k)
		}
	}
}

// place gives each slot its position, each layer centred on the tallest,
// and returns the graph's size.
func (l *slotLayout) place() (width, height int) {
	tallest := 0
	for _, layer := range l.layers {
		tallest = max(tallest, len(layer))
	}
	width = 2*graphPad + len(l.layers)*nodeW + max(0, len(l.layers)-1)*layerGap
	height = 2*graphPad + tallest*nodeH + max(0, tallest-1)*rowGap
	l.x, l.y = make([]int, len(l.depth)), make([]int, len(l.depth))
	for d, layer := range l.layers {
		top := graphPad + (tallest-len(layer))*(nodeH+rowGap)/2
		for k, i := range layer {
			l.x[i], l.y[i] = graphPad+d*(nodeW+layerGap), top+k*(nodeH+rowGap)
		}
	}
	return width, height
}

// edgePath is the SVG path of an edge through the slots of path: from the
// first slot's right side to the last one's left side (short of it by
// the arrowhead), a curve between two layers and a straight line across
// each hidden slot.
func edgePath(path []int, x, y []int) string {
	var b strings.Builder
	bend := layerGap / 2
	fx, fy := x[path[0]]+nodeW, y[path[0]]+nodeH/2
	fmt.Fprintf(&b, "M%d %d", fx, fy)
	for k, s := range path[1:] {
		tx, ty := x[s], y[s]+nodeH/2
		if k == len(path)-2 {
			tx -= 4 // the arrowhead ends at the node
		}
		fmt.Fprintf(&b, " C%d %d %d %d %d %d", fx+bend, fy, tx-bend, ty, tx, ty)
		if k < len(path)-2 {
			fx, fy = tx+nodeW, ty
			fmt.Fprintf(&b, " L%d %d", fx, fy)
		}
	}
	return b.String()
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
