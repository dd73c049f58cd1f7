package actions

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/identity"
)

// The rules of plans and prerequisites, which both boards apply before
// they write anything: CheckPlan for bee_post_plan and `bee post --plan`,
// CheckAfter and CheckPriority for a single post. They judge what can be
// judged without the board; whether the action ids named exist, and how
// they ended, is for the board to check in the transaction that posts.

// Bounds and defaults of plans, prerequisites and priorities.
const (
	// MaxAfter is the most prerequisites one action may name.
	MaxAfter = 64
	// MaxPlan is the most entries one plan may have.
	MaxPlan = 1000
	// MaxKeyLen is the longest key a plan entry may have, in bytes.
	MaxKeyLen = 64
	// MinPriority (most urgent) to MaxPriority (least) are the priorities
	// an action may have; DefaultPriority is what it has when none is
	// given.
	MinPriority     = 0
	MaxPriority     = 4
	DefaultPriority = 2
	// MaxPlanProblems is the most problems one refusal of a plan lists;
	// it counts the rest.
	MaxPlanProblems = 100
)

// Errors CheckPlan, CheckAfter and CheckPriority return. A refused plan's
// *PlanError wraps ErrBadPlan and the sentinel of each problem listed.
var (
	// ErrBadPlan: the plan was refused as a whole; nothing was posted.
	ErrBadPlan = errors.New("plan refused")
	// ErrBadKey: a plan entry's key is empty or not of the form KeyRule
	// describes, or looks like an action id.
	ErrBadKey = errors.New("bad plan key")
	// ErrDuplicateKey: two entries of one plan have the same key.
	ErrDuplicateKey = errors.New("duplicate plan key")
	// ErrUnknownPrerequisite: an after item is neither a key of the plan
	// nor an action id.
	ErrUnknownPrerequisite = errors.New("unknown prerequisite")
	// ErrCycle: entries of a plan wait for each other in a circle.
	ErrCycle = errors.New("prerequisites form a cycle")
	// ErrTooManyPrerequisites: an action names more than MaxAfter.
	ErrTooManyPrerequisites = errors.New("too many prerequisites")
	// ErrPlanTooLarge: a plan has more than MaxPlan entries.
	ErrPlanTooLarge = errors.New("plan too large")
	// ErrBadPriority: a priority outside MinPriority..MaxPriority.
	ErrBadPriority = errors.New("priority out of range")
)

// KeyRule says what a plan key may be, for error messages and tool
// descriptions.
const KeyRule = "1 to 64 letters, digits, '.', '_' or '-', and not an action id like a-3"

// A PlanEntry is one action of a plan, as bee_post_plan and `bee post
// --plan` take it.
type PlanEntry struct {
	// Key names the entry within the plan, for other entries' After and
	// for the key-to-id map a post returns.
	Key   string `json:"key"`
	To    string `json:"to,omitempty"` // as for a post: "", an agent name or an identity
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	// After names the entry's prerequisites: keys of other entries, in
	// any order, and ids of existing actions ("a-12").
	After []string `json:"after,omitempty"`
	// Priority is MinPriority..MaxPriority; nil means DefaultPriority.
	Priority *int `json:"priority,omitempty"`
	// Paths are the path patterns the action will change (pathglob).
	Paths []string `json:"paths,omitempty"`
	// Repo is the repository Paths are in (see Draft.Repo): a bridge sets
	// it to its session's own repository.
	Repo string `json:"repo,omitempty"`
}

// A PlanStep is an accepted entry, checked and normalised, ready for a
// board to insert.
type PlanStep struct {
	Key      string
	Index    int // the entry's position in the plan as given, from 0
	To       string
	Title    string // trimmed
	Body     string
	Priority int
	Paths    []pathglob.Pattern // normalised, each once; nil when none
	Repo     string             // the repository of Paths, as given (CheckPaths accepted it)
	// AfterKeys are the keys of the prerequisites within the plan, each
	// once; every one of them comes earlier in CheckPlan's order.
	AfterKeys []string
	// AfterIDs are the prerequisites that are existing actions, each once,
	// well-formed: the board checks that they exist and have not failed
	// or been cancelled.
	AfterIDs []string
}

// A PlanProblem is one thing wrong with a plan.
type PlanProblem struct {
	// Index is the entry's position in the plan as given (from 0), or -1
	// for a problem of the whole plan.
	Index int
	Key   string // the entry's key as given ("" for the whole plan)
	Err   error  // wraps the problem's sentinel
}

func (p PlanProblem) Error() string {
	switch {
	case p.Index < 0:
		return p.Err.Error()
	case p.Key == "":
		return fmt.Sprintf("entry #%d: %v", p.Index+1, p.Err)
	}
	return fmt.Sprintf("entry #%d (key %q): %v", p.Index+1, p.Key, p.Err)
}

// A PlanError refuses a plan as a whole, naming every problem (the first
// MaxPlanProblems found, counting the rest), in the order of the entries
// they are about. Entries are numbered from 1 in its message, in the order
// given. It wraps ErrBadPlan and the sentinels of
// the problems it lists.
type PlanError struct {
	Problems []PlanProblem
	Omitted  int // problems found beyond MaxPlanProblems
}

func (e *PlanError) Error() string {
	var b strings.Builder
	n := len(e.Problems) + e.Omitted
	if n == 1 {
		b.WriteString("plan refused, nothing was posted:")
	} else {
		fmt.Fprintf(&b, "plan refused, nothing was posted (%d problems):", n)
	}
	for _, p := range e.Problems {
		b.WriteString("\n- ")
		b.WriteString(p.Error())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "\n- and %d more", e.Omitted)
	}
	return b.String()
}

// Unwrap returns ErrBadPlan and every listed problem's error.
func (e *PlanError) Unwrap() []error {
	errs := make([]error, 0, len(e.Problems)+1)
	errs = append(errs, ErrBadPlan)
	for _, p := range e.Problems {
		errs = append(errs, p.Err)
	}
	return errs
}

// CheckPlan checks a plan posted by who, as a whole, and returns its
// entries as steps in an order in which every step comes after the
// prerequisites it names by key (among the orders that do, the one
// closest to the order given: ties go to the earlier entry), so a board
// can insert them in one pass.
//
// It refuses the plan with a *PlanError naming every problem it finds: a
// poster CheckPoster refuses; no entries, or more than MaxPlan; an entry
// CheckPost refuses (recipient, title, body); a key that is empty,
// malformed or an action id (ErrBadKey, see KeyRule), or used twice
// (ErrDuplicateKey); an after item that is neither a key of the plan nor a
// well-formed action id (ErrUnknownPrerequisite); more than MaxAfter
// distinct prerequisites on one entry (ErrTooManyPrerequisites); a
// priority outside MinPriority..MaxPriority (ErrBadPriority); paths
// pathglob.ParseAll refuses; and every cycle among keys, naming the keys
// on it (ErrCycle). Repeated after items and paths count once.
func CheckPlan(who identity.ID, entries []PlanEntry) ([]PlanStep, error) {
	var probs problems
	if err := CheckPoster(who); err != nil {
		probs.add(-1, "", err)
	}
	switch {
	case len(entries) == 0:
		probs.add(-1, "", fmt.Errorf("a plan needs at least one entry: %w", ErrBadPlan))
		return nil, probs.err()
	case len(entries) > MaxPlan:
		probs.add(-1, "", fmt.Errorf("%d entries, more than %d; post the plan in parts, the later ones naming the earlier ones' ids in after: %w",
			len(entries), MaxPlan, ErrPlanTooLarge))
		return nil, probs.err()
	}

	index := indexKeys(entries, &probs)
	steps := make([]PlanStep, len(entries))
	waitsFor := make([][]int, len(entries)) // entry -> entries it names by key
	for i, e := range entries {
		steps[i], waitsFor[i] = checkStep(who, i, e, index, &probs)
	}
	order, stuck := topoOrder(waitsFor)
	if len(stuck) > 0 {
		addCycles(entries, waitsFor, stuck, &probs)
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	out := make([]PlanStep, len(order))
	for k, i := range order {
		out[k] = steps[i]
	}
	return out, nil
}

// indexKeys maps each key of entries to the first entry that has it,
// adding a problem for each bad or repeated key.
func indexKeys(entries []PlanEntry, probs *problems) map[string]int {
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		if err := checkKey(e.Key); err != nil {
			probs.add(i, e.Key, err)
		}
		if e.Key == "" {
			continue
		}
		if j, dup := index[e.Key]; dup {
			probs.add(i, e.Key, fmt.Errorf("the key is entry #%d's too; give each entry its own key: %w", j+1, ErrDuplicateKey))
			continue
		}
		index[e.Key] = i
	}
	return index
}

// checkStep checks entry i, e, of a plan whose keys index maps, as a step:
// its fields, and its after items, each once, as keys of the plan (which
// it returns as the entries it waits for) or action ids. It adds a
// problem for each thing it refuses.
func checkStep(who identity.ID, i int, e PlanEntry, index map[string]int, probs *problems) (PlanStep, []int) {
	s := PlanStep{Key: e.Key, Index: i, To: e.To, Body: e.Body}
	// The recipient apart, so that both it and the title are named; the
	// poster once, for the whole plan.
	title, err := CheckPost(who, "", e.Title, e.Body)
	if err != nil && !errors.Is(err, ErrBadPoster) {
		probs.add(i, e.Key, err)
	}
	if err := CheckRecipient(e.To); err != nil {
		probs.add(i, e.Key, err)
	}
	s.Title = title
	if s.Priority, err = CheckPriority(e.Priority); err != nil {
		probs.add(i, e.Key, err)
	}
	if s.Paths, err = CheckPaths(e.Repo, e.Paths); err != nil {
		probs.add(i, e.Key, err)
	} else if s.Paths != nil {
		s.Repo = e.Repo
	}
	var waitsFor []int
	seen := make(map[string]bool, len(e.After))
	for _, a := range e.After {
		if seen[a] {
			continue
		}
		seen[a] = true
		if j, ok := index[a]; ok {
			s.AfterKeys = append(s.AfterKeys, a)
			waitsFor = append(waitsFor, j)
			continue
		}
		if isActionID(a) {
			s.AfterIDs = append(s.AfterIDs, a)
			continue
		}
		probs.add(i, e.Key, unknownAfter(a, index))
	}
	if n := len(seen); n > MaxAfter {
		probs.add(i, e.Key, fmt.Errorf("%d prerequisites, more than %d; wait for one step that waits for the others: %w",
			n, MaxAfter, ErrTooManyPrerequisites))
	}
	return s, waitsFor
}

// addCycles adds a problem for every cycle among the stuck entries, naming
// the keys on it.
func addCycles(entries []PlanEntry, waitsFor [][]int, stuck []int, probs *problems) {
	for _, cycle := range cycles(waitsFor, stuck) {
		keys := make([]string, 0, len(cycle)+1)
		for _, i := range cycle {
			keys = append(keys, fmt.Sprintf("%q", entries[i].Key))
		}
		keys = append(keys, keys[0])
		probs.add(cycle[0], entries[cycle[0]].Key, fmt.Errorf("waits for itself through %s (each waits for the next); drop one of these after items: %w",
			strings.Join(keys, " → "), ErrCycle))
	}
}

// CheckAfter checks the prerequisites of a single post, which can only be
// existing actions: at most MaxAfter of them (ErrTooManyPrerequisites),
// each a well-formed action id (ErrUnknownPrerequisite, naming every one
// that is not). It returns them each once, in the order given; nil for
// none.
func CheckAfter(after []string) ([]string, error) {
	var out []string
	var bad []string
	seen := make(map[string]bool, len(after))
	for _, a := range after {
		if seen[a] {
			continue
		}
		seen[a] = true
		if isActionID(a) {
			out = append(out, a)
		} else {
			bad = append(bad, fmt.Sprintf("%q", a))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("after: %s not action ids (ids look like a-3): %w", strings.Join(bad, ", "), ErrUnknownPrerequisite)
	}
	if len(out) > MaxAfter {
		return nil, fmt.Errorf("after: %d prerequisites, more than %d; wait for one action that waits for the others: %w",
			len(out), MaxAfter, ErrTooManyPrerequisites)
	}
	return out, nil
}

// CheckPriority returns p, DefaultPriority when p is nil, or
// ErrBadPriority when p is outside MinPriority..MaxPriority.
func CheckPriority(p *int) (int, error) {
	switch {
	case p == nil:
		return DefaultPriority, nil
	case *p < MinPriority || *p > MaxPriority:
		return 0, fmt.Errorf("priority %d is outside %d..%d (%d most urgent, default %d): %w",
			*p, MinPriority, MaxPriority, MinPriority, DefaultPriority, ErrBadPriority)
	}
	return *p, nil
}

// checkKey applies KeyRule.
func checkKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("no key; give each entry a key (%s): %w", KeyRule, ErrBadKey)
	case len(k) > MaxKeyLen:
		return fmt.Errorf("the key is %d bytes, more than %d: %w", len(k), MaxKeyLen, ErrBadKey)
	case isActionID(k):
		return fmt.Errorf("the key looks like an action id, so after could not tell them apart; choose another (%s): %w", KeyRule, ErrBadKey)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(isAlnum(c) || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("the key has %q at byte %d; keys are %s: %w", c, i, KeyRule, ErrBadKey)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isActionID reports whether s is an action id as the boards write them:
// "a-" and a positive decimal without leading zeros (the rule of
// actions/internal/position.ParseActionID, which this package cannot
// import).
func isActionID(s string) bool {
	n, ok := strings.CutPrefix(s, "a-")
	if !ok || n == "" || n[0] == '0' || len(n) > 18 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// unknownAfter says that a names nothing, with a guess at what was meant.
func unknownAfter(a string, index map[string]int) error {
	hint := ""
	if isDigits(a) {
		hint = fmt.Sprintf(" (an action id is a-%s)", a)
	} else {
		best := -1 // the earliest entry whose key differs only in case
		for k, i := range index {
			if strings.EqualFold(k, a) && (best < 0 || i < best) {
				best = i
				hint = fmt.Sprintf(" (keys are case-sensitive: %q?)", k)
			}
		}
	}
	return fmt.Errorf("after %q is neither a key of this plan nor an action id%s: %w", a, hint, ErrUnknownPrerequisite)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// problems collects a plan's problems, keeping the first MaxPlanProblems.
type problems struct {
	list    []PlanProblem
	omitted int
}

func (p *problems) add(index int, key string, err error) {
	if len(p.list) == MaxPlanProblems {
		p.omitted++
		return
	}
	p.list = append(p.list, PlanProblem{Index: index, Key: key, Err: err})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortStableFunc(p.list, func(a, b PlanProblem) int { return cmp.Compare(a.Index, b.Index) })
	return &PlanError{Problems: p.list, Omitted: p.omitted}
}

// topoOrder orders the entries so that each comes after those it waits
// for, the earliest ready entry first (Kahn's algorithm over a heap of
// indexes), and returns the entries it could not order: those on or
// behind a cycle.
func topoOrder(waitsFor [][]int) (order, stuck []int) {
	n := len(waitsFor)
	pending := make([]int, n)    // prerequisites not yet ordered
	unblocks := make([][]int, n) // prerequisite -> entries waiting for it
	for i, ps := range waitsFor {
		pending[i] = len(ps)
		for _, j := range ps {
			unblocks[j] = append(unblocks[j], i)
		}
	}
	ready := &indexHeap{}
	for i := range n {
		if pending[i] == 0 {
			ready.list = append(ready.list, i)
		}
	}
	heap.Init(ready)
	order = make([]int, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, k := range unblocks[i] {
			if pending[k]--; pending[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	for i := range n {
		if pending[i] > 0 {
			stuck = append(stuck, i)
		}
	}
	return order, stuck
}

type indexHeap struct{ list []int }

func (h *indexHeap) Len() int           { return len(h.list) }
func (h *indexHeap) Less(i, j int) bool { return h.list[i] < h.list[j] }
func (h *indexHeap) Swap(i, j int)      { h.list[i], h.list[j] = h.list[j], h.list[i] }
func (h *indexHeap) Push(x any)         { h.list = append(h.list, x.(int)) }
func (h *indexHeap) Pop() any {
	x := h.list[len(h.list)-1]
	h.list = h.list[:len(h.list)-1]
	return x
}

// cycles returns one cycle of each strongly connected component among the
// stuck entries that has one (Tarjan's algorithm), each starting at its
// component's earliest entry, ordered by that entry. Stuck entries on no
// cycle merely wait behind one, and are not named.
func cycles(waitsFor [][]int, stuck []int) [][]int {
	in := make(map[int]bool, len(stuck))
	for _, i := range stuck {
		in[i] = true
	}
	t := tarjan{waitsFor: waitsFor, in: in, index: map[int]int{}, low: map[int]int{}, onStack: map[int]bool{}}
	for _, i := range stuck {
		if _, seen := t.index[i]; !seen {
			t.visit(i)
		}
	}
	var out [][]int
	for _, comp := range t.comps {
		start := comp[0]
		member := make(map[int]bool, len(comp))
		for _, i := range comp {
			member[i] = true
			start = min(start, i)
		}
		if c := shortestCycle(waitsFor, member, start); c != nil {
			out = append(out, c)
		}
	}
	// Components come out in reverse topological order; name them in the
	// plan's order instead.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j][0] < out[j-1][0]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

type tarjan struct {
	waitsFor [][]int
	in       map[int]bool
	next     int
	index    map[int]int
	low      map[int]int
	onStack  map[int]bool
	stack    []int
	comps    [][]int
}

func (t *tarjan) visit(v int) {
	t.index[v], t.low[v] = t.next, t.next
	t.next++
	t.stack = append(t.stack, v)
	t.onStack[v] = true
	for _, w := range t.waitsFor[v] {
		if !t.in[w] {
			continue
		}
		if _, seen := t.index[w]; !seen {
			t.visit(w)
			t.low[v] = min(t.low[v], t.low[w])
		} else if t.onStack[w] {
			t.low[v] = min(t.low[v], t.index[w])
		}
	}
	if t.low[v] != t.index[v] {
		return
	}
	var comp []int
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[w] = false
		comp = append(comp, w)
		if w == v {
			break
		}
	}
	t.comps = append(t.comps, comp)
}

// shortestCycle returns the shortest cycle from start back to start
// within member, as the list of entries on it from start; nil when there
// is none (a component of one entry that does not wait for itself).
func shortestCycle(waitsFor [][]int, member map[int]bool, start int) []int {
	prev := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range waitsFor[v] {
			if w == start {
				var path []int
				for x := v; x != -1; x = prev[x] {
					path = append(path, x)
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if _, seen := prev[w]; !seen && member[w] {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil
}
