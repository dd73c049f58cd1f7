package pathglob

import (
	"slices"
	"strings"
)

// Overlap reports whether some clean path matches both p and q, and
// returns one such path (the witness; Match(p, w) and Match(q, w) both
// hold). The answer is exact for this language, not an approximation:
// the patterns' segments are walked as a product automaton, and two
// segments with '*' are compared by a product automaton over their
// characters. A witness never has an empty, "." or ".." segment. The zero
// Pattern overlaps nothing.
//
// The cost is at most proportional to the product of the two patterns'
// lengths (a few hundred nanoseconds for typical patterns; see the
// benchmarks), and nothing is allocated when they do not overlap (unless
// they are long: past 512 states, the walk's set of visited states is
// allocated).
func Overlap(p, q Pattern) (witness string, ok bool) {
	if p.segs == nil || q.segs == nil || !prefixRelated(p.prefix, q.prefix) {
		return "", false
	}
	w := segWalk{p: p.segs, q: q.segs}
	w.seen.init((len(p.segs) + 1) * (len(q.segs) + 1))
	if !w.walk(0, 0) {
		return "", false
	}
	if len(w.out) == 0 {
		// Both patterns are all "**": any path will do.
		return "x", true
	}
	slices.Reverse(w.out)
	return strings.Join(w.out, "/"), true
}

// prefixRelated reports whether a is a segment-prefix of b or b of a:
// the necessary condition for two patterns with prefixes a and b to
// overlap (see Pattern.Prefix).
func prefixRelated(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == "" || strings.HasPrefix(b, a) && (len(a) == len(b) || b[len(a)] == '/')
}

// segWalk searches the product of two patterns' segment automata for a
// path to the end of both, depth first. Every move advances at least one
// pattern (a "**" against a "**" consuming a segment gets nowhere new, so
// it is not a move), so the graph is acyclic and each state is visited
// once: seen marks states known to fail. The witness is written only on
// the way back from success, so a search that fails allocates nothing.
type segWalk struct {
	p, q []segment
	seen bitset
	out  []string // the witness's segments, last first
}

func (w *segWalk) walk(i, j int) bool {
	if i == len(w.p) && j == len(w.q) {
		return true
	}
	if w.seen.testAndSet(i*(len(w.q)+1) + j) {
		return false
	}
	// A "**" may match nothing.
	if i < len(w.p) && w.p[i].kind == globstar && w.walk(i+1, j) {
		return true
	}
	if j < len(w.q) && w.q[j].kind == globstar && w.walk(i, j+1) {
		return true
	}
	if i == len(w.p) || j == len(w.q) {
		return false
	}
	// Both consume one segment.
	a, b := w.p[i], w.q[j]
	switch {
	case a.kind == globstar && b.kind == globstar:
		return false
	case a.kind == globstar:
		if w.walk(i, j+1) {
			w.out = append(w.out, sample(b))
			return true
		}
	case b.kind == globstar:
		if w.walk(i+1, j) {
			w.out = append(w.out, sample(a))
			return true
		}
	default:
		if _, ok := segOverlap(a, b, false); ok && w.walk(i+1, j+1) {
			s, _ := segOverlap(a, b, true)
			w.out = append(w.out, s)
			return true
		}
	}
	return false
}

// sample returns a segment s matches: s itself when literal, else s
// without its stars, unless that is empty, "." or "..", which are not
// segments of a clean path: then its first star becomes "x".
func sample(s segment) string {
	if s.kind == literal {
		return s.text
	}
	t := strings.ReplaceAll(s.text, "*", "")
	if t == "" || t == "." || t == ".." {
		t = strings.ReplaceAll(strings.Replace(s.text, "*", "x", 1), "*", "")
	}
	return t
}

// segOverlap reports whether some segment matches both a and b (neither
// is "**"), and returns one when asked to (witness), which allocates.
func segOverlap(a, b segment, witness bool) (string, bool) {
	switch {
	case a.kind == literal && b.kind == literal:
		return a.text, a.text == b.text
	case a.kind == literal:
		return a.text, globMatch(b.text, a.text)
	case b.kind == literal:
		return b.text, globMatch(a.text, b.text)
	}
	c := charWalk{g: a.text, h: b.text, record: witness}
	c.seen.init((len(c.g) + 1) * (len(c.h) + 1) * 4)
	if !c.walk(0, 0, dEmpty) {
		return "", false
	}
	slices.Reverse(c.out)
	return string(c.out), true
}

// What a charWalk's segment so far is, as far as cleanliness goes: a
// segment must end in dOther ("" , "." and ".." are not segments).
const (
	dEmpty uint8 = iota
	dDot
	dDotDot
	dOther
)

func nextD(d uint8, c byte) uint8 {
	switch {
	case c == '.' && d == dEmpty:
		return dDot
	case c == '.' && d == dDot:
		return dDotDot
	}
	return dOther
}

// charWalk searches the product of two segment globs' automata (and of
// the three-state check that the segment is not "", "." or ".."), depth
// first, for a string both match. As in segWalk, every move advances one
// glob or leaves the small check for good ("*" against "*" takes one
// character only to reach dOther), so each state is visited once.
type charWalk struct {
	g, h   string
	seen   bitset
	record bool   // write out on the way back from success
	out    []byte // the witness, last byte first
}

func (c *charWalk) walk(a, b int, d uint8) bool {
	if a == len(c.g) && b == len(c.h) && d == dOther {
		return true
	}
	if c.seen.testAndSet((a*(len(c.h)+1)+b)*4 + int(d)) {
		return false
	}
	if a < len(c.g) && c.g[a] == '*' && c.walk(a+1, b, d) {
		return true
	}
	if b < len(c.h) && c.h[b] == '*' && c.walk(a, b+1, d) {
		return true
	}
	if a == len(c.g) || b == len(c.h) {
		return false
	}
	x, y := c.g[a], c.h[b]
	switch {
	case x == '*' && y == '*':
		// Any character: one that makes the segment clean, once.
		return d != dOther && c.step('x', a, b, d)
	case x == '*':
		return c.step(y, a, b+1, d)
	case y == '*':
		return c.step(x, a+1, b, d)
	case x == y:
		return c.step(x, a+1, b+1, d)
	}
	return false
}

func (c *charWalk) step(ch byte, a, b int, d uint8) bool {
	if !c.walk(a, b, nextD(d, ch)) {
		return false
	}
	if c.record {
		c.out = append(c.out, ch)
	}
	return true
}

// A bitset of states, inline up to 512 of them.
type bitset struct {
	small [8]uint64
	big   []uint64
}

func (s *bitset) init(n int) {
	if n > len(s.small)*64 {
		s.big = make([]uint64, (n+63)/64)
	}
}

// testAndSet sets bit k and reports whether it was set already.
func (s *bitset) testAndSet(k int) bool {
	words := s.small[:]
	if s.big != nil {
		words = s.big
	}
	w, m := k/64, uint64(1)<<(k%64)
	old := words[w]&m != 0
	words[w] |= m
	return old
}
