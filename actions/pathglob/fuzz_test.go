package pathglob_test

import (
	"path"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/pathglob"
)

// reference is a second, independent matcher: the pattern as a regular
// expression over "/"+path, one "/segment" per segment, the implicit
// "/**" included.
func reference(t testing.TB, p pathglob.Pattern) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, seg := range strings.Split(p.String(), "/") {
		if seg == "**" {
			b.WriteString("(?:/[^/]+)*")
			continue
		}
		b.WriteString("/")
		for _, r := range seg {
			if r == '*' {
				b.WriteString("[^/]*")
			} else {
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
	}
	b.WriteString("(?:/[^/]+)*$")
	re, err := regexp.Compile(b.String())
	require.NoError(t, err)
	return re
}

func refMatch(re *regexp.Regexp, name string) bool {
	name = path.Clean(name)
	if name == "." {
		return re.MatchString("")
	}
	if strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") {
		return false
	}
	return re.MatchString("/" + name)
}

// FuzzMatch checks Match against the regular-expression reference, and
// that Parse never panics.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"src/auth", "src/auth/a.go"}, {"**/*.go", "a/b/c.go"}, {"a/**/b", "a/x/y/b"}, {"a*b*c", "aXbYc"},
		{"*", ""}, {"**", "."}, {"src/*/y", "src/a/b/y"}, {"./x/", "x//y"}, {"a", "../a"}, {"*.*", "a.b/c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := pathglob.Parse(pattern)
		if err != nil {
			require.ErrorIs(t, err, pathglob.ErrBadPattern)
			return
		}
		require.Equal(t, refMatch(reference(t, p), name), pathglob.Match(p, name), "pattern %q, path %q", p, name)
	})
}

// alphabet is what FuzzOverlap's patterns are made of; its paths are
// made of the same less '*'.
const alphabet = "ab.*/"

// smallPattern maps fuzz bytes onto the alphabet (its own bytes map to
// themselves), at most 10 of them.
func smallPattern(raw string) string {
	if len(raw) > 10 {
		raw = raw[:10]
	}
	b := []byte(raw)
	for i, c := range b {
		if strings.IndexByte(alphabet, c) < 0 {
			b[i] = alphabet[int(c)%len(alphabet)]
		}
	}
	return string(b)
}

// smallPaths are every clean path over "ab." of at most 7 bytes.
var smallPaths = sync.OnceValue(func() []string {
	var out []string
	var grow func(s string)
	grow = func(s string) {
		if s != "" && isClean(s) {
			out = append(out, s)
		}
		if len(s) == 7 {
			return
		}
		for _, c := range "ab./" {
			grow(s + string(c))
		}
	}
	grow("")
	return out
})

func isClean(s string) bool {
	for _, seg := range strings.Split(s, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// FuzzOverlap checks Overlap against brute force: every clean path up to
// a bound is tried against both patterns. Overlap must never say "no"
// where brute force found a common path, and its witness, when it says
// "yes", must match both (by Match and by the reference).
func FuzzOverlap(f *testing.F) {
	for _, s := range [][2]string{
		{"*", "**"}, {"a*", "*b"}, {"a/**", "a"}, {"**/a.b", "a/b/a.b"}, {"a/*/b", "a/a/*"}, {"a*", "b*"},
		{".*", "*."}, {"a*a*b", "*ab*"}, {"**/a/**", "b/**"}, {"*/a", "*/b"}, {"a*.b", "a.*b"}, {"**/b", "a/**/a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rawP, rawQ string) {
		p, err := pathglob.Parse(smallPattern(rawP))
		if err != nil {
			return
		}
		q, err := pathglob.Parse(smallPattern(rawQ))
		if err != nil {
			return
		}
		w, ok := pathglob.Overlap(p, q)
		_, back := pathglob.Overlap(q, p)
		require.Equal(t, ok, back, "Overlap(%q, %q) is symmetric", p, q)
		if ok {
			checkWitness(t, p, q, w)
			require.True(t, refMatch(reference(t, p), w), "witness %q matches %q by the reference", w, p)
			require.True(t, refMatch(reference(t, q), w), "witness %q matches %q by the reference", w, q)
			return
		}
		for _, s := range smallPaths() {
			if pathglob.Match(p, s) && pathglob.Match(q, s) {
				t.Fatalf("Overlap(%q, %q) says no, but %q matches both", p, q, s)
			}
		}
	})
}
