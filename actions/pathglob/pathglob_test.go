package pathglob_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/pathglob"
)

func TestParse_Normalises(t *testing.T) {
	for _, tc := range []struct{ in, want, prefix string }{
		{"src/auth", "src/auth", "src/auth"},
		{"./src/auth", "src/auth", "src/auth"},
		{"src/auth/", "src/auth", "src/auth"},
		{"./src/auth/", "src/auth", "src/auth"},
		{"src/auth/**", "src/auth/**", "src/auth"},
		{"src/*/y", "src/*/y", "src"},
		{"src/a*/y", "src/a*/y", "src"},
		{"**/x.go", "**/x.go", ""},
		{"*.go", "*.go", ""},
		{"**", "**", ""},
		{"a/**/b/**", "a/**/b/**", "a"},
		{"?[{}]!", "?[{}]!", "?[{}]!"},
		{"héllo/wörld", "héllo/wörld", "héllo/wörld"},
		{"~/x", "~/x", "~/x"},
		{"...", "...", "..."},
		{".hidden/x", ".hidden/x", ".hidden/x"},
		{strings.Repeat("a", pathglob.MaxPatternLen), strings.Repeat("a", pathglob.MaxPatternLen), strings.Repeat("a", pathglob.MaxPatternLen)},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := pathglob.Parse(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, p.String())
			require.Equal(t, tc.prefix, p.Prefix())
			again, err := pathglob.Parse(p.String())
			require.NoError(t, err)
			require.Equal(t, p, again, "String parses back to an equal Pattern")
		})
	}
}

func TestParse_Refuses(t *testing.T) {
	for _, tc := range []struct{ name, in, says string }{
		{"empty", "", "empty"},
		{"absolute", "/etc/passwd", "absolute"},
		{"absolute root", "/", "absolute"},
		{"windows drive backslash", `C:\x`, "Windows drive"},
		{"windows drive slash", "c:/x", "Windows drive"},
		{"windows drive alone", "C:", "Windows drive"},
		{"escape", "../x", `".."`},
		{"escape inside", "a/../../x", `".."`},
		{"dotdot at end", "a/..", `".."`},
		{"dot inside", "a/./b", `"."`},
		{"dot at end", "a/.", `"."`},
		{"root dot", ".", "root"},
		{"root dot slash", "./", "root"},
		{"two leading dot slashes", "././x", `"."`},
		{"empty segment", "a//b", "empty segment"},
		{"two trailing slashes", "a//", "empty segment"},
		{"star star inside", "a**b", `"**" inside`},
		{"star star suffix", "src/x**", `"**" inside`},
		{"triple star", "***", `"**" inside`},
		{"backslash", `src\auth`, "backslash"},
		{"nul", "a\x00b", "control"},
		{"newline", "a\nb", "control"},
		{"del", "a\x7fb", "control"},
		{"bad utf8", "a\xffb", "UTF-8"},
		{"too long", strings.Repeat("a", pathglob.MaxPatternLen+1), "more than 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pathglob.Parse(tc.in)
			require.Error(t, err)
			require.ErrorIs(t, err, pathglob.ErrBadPattern)
			var pe *pathglob.Error
			require.True(t, errors.As(err, &pe))
			require.Equal(t, tc.in, pe.Pattern)
			require.Contains(t, err.Error(), tc.says)
			require.Contains(t, err.Error(), "path pattern ")
			require.Equal(t, err, pathglob.Check(tc.in))
		})
	}
}

func TestParseAll(t *testing.T) {
	ps, err := pathglob.ParseAll([]string{"src/**", "./src/**", "docs/x.md", "src/**/"})
	require.NoError(t, err)
	require.Len(t, ps, 2, "equal after normalisation: kept once")
	require.Equal(t, "src/**", ps[0].String())
	require.Equal(t, "docs/x.md", ps[1].String())

	_, err = pathglob.ParseAll(nil)
	require.ErrorIs(t, err, pathglob.ErrBadPattern)
	require.ErrorContains(t, err, "at least one")

	many := make([]string, pathglob.MaxPatterns+1)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i)
	}
	_, err = pathglob.ParseAll(many[:pathglob.MaxPatterns])
	require.NoError(t, err)
	_, err = pathglob.ParseAll(many)
	require.ErrorIs(t, err, pathglob.ErrBadPattern)
	require.ErrorContains(t, err, "more than 64")

	_, err = pathglob.ParseAll([]string{"ok", "../up", "fine/**", "/abs"})
	require.ErrorIs(t, err, pathglob.ErrBadPattern)
	require.ErrorContains(t, err, `"../up"`, "every refused pattern is named")
	require.ErrorContains(t, err, `"/abs"`)
	require.NotContains(t, err.Error(), `"ok"`)
}

func TestPattern_JSON(t *testing.T) {
	var got struct{ Paths []pathglob.Pattern }
	require.NoError(t, json.Unmarshal([]byte(`{"Paths":["./src/","**/*.go"]}`), &got))
	require.Equal(t, []pathglob.Pattern{pathglob.MustParse("src"), pathglob.MustParse("**/*.go")}, got.Paths)
	out, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, `{"Paths":["src","**/*.go"]}`, string(out))
	require.ErrorIs(t, json.Unmarshal([]byte(`{"Paths":["../x"]}`), &got), pathglob.ErrBadPattern)
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"src/auth", []string{"src/auth", "src/auth/a.go", "src/auth/x/y/z", "./src/auth/a.go", "src/x/../auth/a.go"},
			[]string{"src", "src/authz", "src/authz/a.go", "lib/src/auth", "", ".", "src/Auth/a.go"}},
		{"src/auth/**", []string{"src/auth", "src/auth/a.go", "src/auth/x/y"}, []string{"src/au", "src"}},
		{"*.go", []string{"main.go", ".go", "x.go/inner"}, []string{"cmd/main.go", "main.goo", "go"}},
		{"**/*.go", []string{"main.go", "cmd/main.go", "a/b/c/d.go", "a/b.go/c"}, []string{"main.c", "a/b/c"}},
		{"**/x.go", []string{"x.go", "a/b/x.go", "a/x.go/y"}, []string{"a/xx.go", "x.g"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b", "a/b/b", "a/x/b/c"}, []string{"a", "b", "a/x", "ab", "a/xb"}},
		{"src/*/y", []string{"src/a/y", "src/abc/y/z"}, []string{"src/y", "src/a/b/y", "src/a/yy"}},
		{"a*b*c", []string{"abc", "aXbYc", "abbbc", "acbc"}, []string{"ab", "bc", "acb", "a/b/c"}},
		{"*", []string{"x", "x/y/z", ".hidden"}, []string{"", "."}},
		{"**", []string{"x", "x/y/z", "", "."}, nil},
		{"?[a]", []string{"?[a]", "?[a]/b"}, []string{"x[a]", "?a"}},
		{"a", []string{"a"}, []string{"/a", "../a", "..", "../x/a"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			p := pathglob.MustParse(tc.pattern)
			for _, s := range tc.yes {
				require.True(t, pathglob.Match(p, s), "%q should match %q", tc.pattern, s)
			}
			for _, s := range tc.no {
				require.False(t, pathglob.Match(p, s), "%q should not match %q", tc.pattern, s)
			}
		})
	}
	require.False(t, pathglob.Match(pathglob.Pattern{}, "x"), "the zero Pattern matches nothing")
}

func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		p, q string
		want bool
	}{
		{"*", "**", true},
		{"a*", "*b", true},
		{"src/**", "src", true},
		{"**/x.go", "a/b/x.go", true},
		{"src/*/y", "src/a/*", true},
		{"src/auth/**", "src/auth/login.go", true},
		{"src", "src/auth/login.go", true},
		{"src/auth", "src", true},
		{"**", "**", true},
		{"**/*.go", "cmd/**/main.go", true},
		{"*.go", "main.go", true},
		{"*.go", "cmd/main.go", false},
		{"*.go", "**/*.go", true},
		{"a/**/b", "a/c", true}, // a/c/b
		{"a*c", "ab*", true},    // abc
		{"a*", "b*", false},
		{"*a", "*b", false},
		{"a*b", "a*c", false},
		{"src", "lib", false},
		{"src/auth", "src/authz", false},
		{"src/a/y", "src/*/z", false},
		{"docs/*.md", "docs/*.txt", false},
		{".*", "*.", true},   // ".x.", never "." or ".."
		{".*.", "*..", true}, // "..." at least
		{"a/*/c", "a/b/*/c", true},
		{"**/a/**", "b/**", true},
		{"**/a", "**/b", true},                 // a/b
		{"*/a", "*/b", false},                  // the second segment is a in one, b in the other
		{"*/a", "**/b", true},                  // x/a/b
		{"src/a*/y.go", "src/*b/*/z.go", true}, // src/ab/y.go/z.go: a pattern covers what is below it
		{"src/a*/y.go", "src/*b/z.go", false},
	} {
		t.Run(tc.p+" vs "+tc.q, func(t *testing.T) {
			p, q := pathglob.MustParse(tc.p), pathglob.MustParse(tc.q)
			w, ok := pathglob.Overlap(p, q)
			require.Equal(t, tc.want, ok, "witness %q", w)
			w2, ok2 := pathglob.Overlap(q, p)
			require.Equal(t, ok, ok2, "symmetric")
			if !ok {
				require.Empty(t, w)
				return
			}
			for _, w := range []string{w, w2} {
				checkWitness(t, p, q, w)
			}
		})
	}
	_, ok := pathglob.Overlap(pathglob.Pattern{}, pathglob.MustParse("**"))
	require.False(t, ok, "the zero Pattern overlaps nothing")
}

// checkWitness checks that w is a clean path that matches both p and q.
func checkWitness(t *testing.T, p, q pathglob.Pattern, w string) {
	t.Helper()
	require.NotEmpty(t, w)
	for _, seg := range strings.Split(w, "/") {
		require.NotContains(t, []string{"", ".", ".."}, seg, "witness %q is a clean path", w)
	}
	require.True(t, pathglob.Match(p, w), "witness %q matches %q", w, p)
	require.True(t, pathglob.Match(q, w), "witness %q matches %q", w, q)
}

// TestPrefix_Properties checks the two promises of Pattern.Prefix that
// boards index by, on every pair from a list of patterns and paths.
func TestPrefix_Properties(t *testing.T) {
	patterns := []string{"src", "src/auth", "src/auth/**", "src/*/y", "src/a*/y", "**/x.go", "*.go", "a/**/b",
		"src/auth/x.go", "lib/**", "**", "src/a/*", "docs/*.md"}
	paths := []string{"src", "src/auth", "src/auth/x.go", "src/a/y", "src/ab/y/z", "x.go", "lib/x.go", "a/b", "a/q/b",
		"docs/r.md", "main.go"}
	for _, ps := range patterns {
		p := pathglob.MustParse(ps)
		for _, path := range paths {
			if pathglob.Match(p, path) {
				require.Contains(t, pathglob.SegmentPrefixes(path), p.Prefix(), "%q matches %q", ps, path)
			}
		}
		for _, qs := range patterns {
			q := pathglob.MustParse(qs)
			if _, ok := pathglob.Overlap(p, q); ok {
				related := contains(pathglob.SegmentPrefixes(p.Prefix()), q.Prefix()) ||
					contains(pathglob.SegmentPrefixes(q.Prefix()), p.Prefix())
				require.True(t, related, "%q and %q overlap, so their prefixes %q and %q are related", ps, qs, p.Prefix(), q.Prefix())
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSegmentPrefixes(t *testing.T) {
	require.Equal(t, []string{"", "a", "a/b", "a/b/c"}, pathglob.SegmentPrefixes("a/b/c"))
	require.Equal(t, []string{"", "a"}, pathglob.SegmentPrefixes("a"))
	require.Equal(t, []string{""}, pathglob.SegmentPrefixes(""))
	require.Equal(t, []string{""}, pathglob.SegmentPrefixes("."))
	require.Equal(t, []string{"", "a", "a/b"}, pathglob.SegmentPrefixes("./a//b/"))
}

func TestOverlap_Long(t *testing.T) {
	// The longest patterns cost a bounded walk and still answer exactly.
	seg := strings.Repeat("*a", 60)
	long := strings.Repeat(seg+"/", 4) + "**"
	p := pathglob.MustParse(long)
	q := pathglob.MustParse(strings.Repeat("**/", 100) + "b")
	w, ok := pathglob.Overlap(p, q)
	require.True(t, ok)
	checkWitness(t, p, q, w)
	r := pathglob.MustParse(strings.Repeat("a*", 250))
	s := pathglob.MustParse(strings.Repeat("*b", 250))
	w, ok = pathglob.Overlap(r, s)
	require.True(t, ok)
	checkWitness(t, r, s, w)
	_, ok = pathglob.Overlap(r, pathglob.MustParse(strings.Repeat("b*", 250)))
	require.False(t, ok)
}

func TestOverlap_NoAllocWhenDisjoint(t *testing.T) {
	// Every pattern covers what is below it, so src/*b/*/z.go would overlap
	// (src/ab/y.go/z.go); these do not.
	p, q := pathglob.MustParse("src/a*/y.go"), pathglob.MustParse("src/*b/z.go")
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := pathglob.Overlap(p, q); ok {
			t.Fatal("src/a*/y.go and src/*b/z.go do not overlap")
		}
	})
	require.Zero(t, allocs)
}
