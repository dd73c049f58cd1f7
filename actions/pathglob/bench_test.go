package pathglob_test

import (
	"fmt"
	"testing"

	"github.com/tractat-us/bee/actions/pathglob"
)

// typical are patterns as agents write them.
var typical = []string{
	"src/auth/**", "src/auth/login.go", "internal/*/store.go", "**/*_test.go", "docs/*.md",
	"cmd/bee/main.go", "actions/pathglob", "**/testdata/**", "web/static/*.css", "go.mod",
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := pathglob.Parse(typical[i%len(typical)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverlap takes every pair of typical patterns, overlapping or not.
func BenchmarkOverlap(b *testing.B) {
	ps := make([]pathglob.Pattern, len(typical))
	for i, s := range typical {
		ps[i] = pathglob.MustParse(s)
	}
	b.ReportAllocs()
	n := len(ps) * len(ps)
	for i := 0; b.Loop(); i++ {
		k := i % n
		pathglob.Overlap(ps[k/len(ps)], ps[k%len(ps)])
	}
}

// BenchmarkOverlap_Kinds times one pair of each shape.
func BenchmarkOverlap_Kinds(b *testing.B) {
	for _, pair := range [][2]string{
		{"src/auth/**", "src/billing/**"},    // disjoint by prefix
		{"src/auth/**", "src/auth/login.go"}, // literal under a directory
		{"**/*_test.go", "src/auth/**"},      // globstar against globstar
		{"src/*/y.go", "src/a*/*.go"},        // two globs in one segment
		{"**/*.go", "docs/*.md"},             // overlap only below docs/x.md: docs/x.md/x.go
		{"src/a*/y.go", "src/*b/z.go"},       // no overlap, found by a search
	} {
		p, q := pathglob.MustParse(pair[0]), pathglob.MustParse(pair[1])
		b.Run(fmt.Sprintf("%s_vs_%s", pair[0], pair[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pathglob.Overlap(p, q)
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	ps := make([]pathglob.Pattern, len(typical))
	for i, s := range typical {
		ps[i] = pathglob.MustParse(s)
	}
	paths := []string{"src/auth/login.go", "internal/board/store.go", "cmd/bee/main_test.go", "docs/design/x.md", "README.md"}
	b.ReportAllocs()
	n := len(ps) * len(paths)
	for i := 0; b.Loop(); i++ {
		k := i % n
		pathglob.Match(ps[k/len(paths)], paths[k%len(paths)])
	}
}

// BenchmarkMatch_10000 is the guard's worst case without the prefix
// index: one path against 10,000 live reservations' patterns, one by one.
func BenchmarkMatch_10000(b *testing.B) {
	ps := make([]pathglob.Pattern, 10000)
	for i := range ps {
		ps[i] = pathglob.MustParse(fmt.Sprintf("pkg%d/%s", i%500, typical[(i/500)%len(typical)]))
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, p := range ps {
			if pathglob.Match(p, "pkg7/src/auth/login.go") {
				n++
			}
		}
		if n == 0 {
			b.Fatal("pkg7/src/auth/** should match")
		}
	}
}
