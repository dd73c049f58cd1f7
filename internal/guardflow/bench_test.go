package guardflow

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/bridge"
)

// BenchmarkGuard_RealBridge measures the edit guard's whole round trip as
// Claude Code sees it (from starting `/bin/sh -c '<bee-hook> --guard'`
// with an Edit's input to its exit), against the real bee-mcp of a
// stand-in claude on a board file in a git repository, where a person
// holds src/auth/** and, beside it, reserved=N other reservations of the
// same repository are live (each its own pattern, pkg/pNNNNN/**). In the
// same run, round-robin: a no-op hook (`true`, a shell builtin; and a Go
// program that does nothing), the guard allowing (README.md) and denying
// (src/auth/login.go). For each, p50 and p99 of wall and CPU time; bee's
// share is the guard's less the Go no-op's. Each b.N is one round of
// every hook:
//
//	go test -run '^$' -bench Guard_RealBridge -benchtime 400x ./internal/guardflow/
func BenchmarkGuard_RealBridge(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("reserved=%d", n), func(b *testing.B) { benchGuard(b, n) })
	}
}

func benchGuard(b *testing.B, others int) {
	bin := built(b)
	repo := newRepo(b, "git@github.com:tractat-us/bee.git")
	path, runDir := filled(b, others), filepath.Join(b.TempDir(), "run")
	s := start(b, repo, path, runDir)

	guard := filepath.Join(bin, "bee-hook") + " --guard"
	hooks := []struct {
		name, cmd, input string
		deny             bool
	}{
		{"noop-sh", "true", guardInput("Edit", repo, filepath.Join(repo, "README.md")), false},
		{"noop-go", filepath.Join(bin, "noop"), guardInput("Edit", repo, filepath.Join(repo, "README.md")), false},
		{"guard-allow", guard, guardInput("Edit", repo, filepath.Join(repo, "README.md")), false},
		{"guard-deny", guard, guardInput("Edit", repo, filepath.Join(repo, "src/auth/login.go")), true},
	}
	wall := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	b.ResetTimer()
	for round := range b.N {
		for i := range hooks {
			h := hooks[(round+i)%len(hooks)]
			r := s.hook(hookCommand{Command: h.cmd, Input: h.input, Dir: repo})
			switch {
			case r.Exit != 0 || r.Stderr != "":
				b.Fatalf("%s: exit %d, stderr %q", h.name, r.Exit, r.Stderr)
			case h.deny != strings.Contains(r.Stdout, `"permissionDecision":"deny"`):
				b.Fatalf("%s: stdout %q", h.name, r.Stdout)
			}
			wall[h.name] = append(wall[h.name], r.Took)
			cpu[h.name] = append(cpu[h.name], r.CPU)
		}
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	for _, h := range hooks {
		b.ReportMetric(q(wall[h.name], 0.5), h.name+"-p50-ms")
		b.ReportMetric(q(wall[h.name], 0.99), h.name+"-p99-ms")
		b.ReportMetric(q(cpu[h.name], 0.5), h.name+"-cpu-p50-ms")
	}
	for _, g := range []string{"guard-allow", "guard-deny"} {
		b.ReportMetric(q(wall[g], 0.5)-q(wall["noop-go"], 0.5), "bee-share-"+strings.TrimPrefix(g, "guard-")+"-p50-ms")
		b.ReportMetric(q(wall[g], 0.99)-q(wall["noop-go"], 0.99), "bee-share-"+strings.TrimPrefix(g, "guard-")+"-p99-ms")
	}
}

// BenchmarkCheckPaths measures the bridge's side of the guard alone, in
// this process: Session.CheckPaths on a board file (where the file lands,
// then the board's Conflicts) for one file that is free and one that a
// person holds, with reserved=N other live reservations in the
// repository:
//
//	go test -run '^$' -bench CheckPaths ./internal/guardflow/
func BenchmarkCheckPaths(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("reserved=%d", n), func(b *testing.B) {
			repo := newRepo(b, "git@github.com:tractat-us/bee.git")
			bd, err := board.Open(filled(b, n), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer bd.Close()
			s, err := bridge.NewSession(b.Context(), bridge.Config{Agent: "bench", Source: bd, Dir: repo})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for _, tc := range []struct {
				name, file string
				held       int
			}{{"allow", "README.md", 0}, {"deny", "src/auth/login.go", 1}} {
				paths := []string{filepath.Join(repo, tc.file)}
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						held, err := s.CheckPaths(b.Context(), paths)
						if err != nil || len(held) != tc.held {
							b.Fatalf("%d held (%v), want %d", len(held), err, tc.held)
						}
					}
				})
			}
		})
	}
}

// The boards the benchmarks start from, made once per reservation count
// and copied for each benchmark.
var (
	fillMu sync.Mutex
	fills  = map[int]string{}
)

// filled returns a fresh copy of a board with a person's reservation of
// src/auth/** in the benchmarks' repository and others more, each of one
// pattern of its own.
func filled(b *testing.B, others int) string {
	b.Helper()
	fillMu.Lock()
	defer fillMu.Unlock()
	src, ok := fills[others]
	if !ok {
		src = filepath.Join(bin, fmt.Sprintf("board-%d.db", others)) // removed with bin
		fill(b, src, others)
		fills[others] = src
	}
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), "board.db")
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return dst
}

// fill makes the board at path (see filled); closing it leaves it whole
// in the one file.
func fill(b *testing.B, path string, others int) {
	b.Helper()
	bd, err := board.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Close()
	const repoName = "github.com/tractat-us/bee"
	start := time.Now()
	if _, err := bd.Reserve(b.Context(), "user:ann", actions.ReserveRequest{Repo: repoName, Patterns: []string{"src/auth/**"}, Reason: "moving sessions"}); err != nil {
		b.Fatal(err)
	}
	for i := range others {
		who := actions.Poster(fmt.Sprintf("user:u%d", i%50))
		if _, err := bd.Reserve(b.Context(), who, actions.ReserveRequest{Repo: repoName, Patterns: []string{fmt.Sprintf("pkg/p%05d/**", i)}, Reason: "bulk"}); err != nil {
			b.Fatal(err)
		}
	}
	rs, err := bd.Reservations(b.Context(), repoName)
	if err != nil || len(rs) != others+1 {
		b.Fatalf("%d reservations live, want %d (%v)", len(rs), others+1, err)
	}
	b.Logf("%d reservations made in %v", others+1, time.Since(start))
}
