package boards

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// BenchmarkReservations measures reservations on each board, in one
// repository holding 10,000 live reservations (one pattern each, of 100
// identities, as agents reserve packages, commands and files):
//
//   - conflicts: the guard's question, Conflicts for one file path, a hit
//     (a reserved package's file) and a miss (a path no one holds), in
//     turn: time per call (ns/op) and its p50 and p99.
//   - reserve: the cost of a grant: Reserve of one new pattern by a
//     member, with the 10,000 in place (ns/op, p50, p99);
//   - post: beside it, in the same run, the cost of a Post (a write of
//     about the same size).
//
// Each also reports the CPU this process spent per call (cpu-µs/op):
// for the file board, all of the board's work; for PostgreSQL, the
// client's share. On a busy machine, the latencies carry the machine's
// load; the CPU does not.
//
// Run without -race:
//
//	go test -run '^$' -bench Reservations -benchtime 2000x ./actions/boards/
func BenchmarkReservations(b *testing.B) {
	for _, kind := range []string{"file", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			var location string
			if kind == "file" {
				location = filepath.Join(b.TempDir(), "board.db")
			} else {
				c := pgtest.Shared(b)
				location = c.URL(c.NewDB(b))
			}
			board := openBench(b, location)
			holders := fillReservations(b, board, 10_000)
			b.Run("conflicts", func(b *testing.B) { benchConflicts(b, board) })
			b.Run("reserve", func(b *testing.B) { benchReserve(b, board, holders[0]) })
			b.Run("post", func(b *testing.B) { benchPost(b, board) })
		})
	}
}

const benchRepo = "github.com/example/monorepo"

// fillReservations makes n live reservations in benchRepo, of 100 joined
// identities, and returns the identities.
func fillReservations(b *testing.B, board actions.Board, n int) []actions.Poster {
	b.Helper()
	holders := make([]actions.Poster, 100)
	for i := range holders {
		who := boardtest.Mint(b, fmt.Sprintf("agent%d", i))
		if err := board.Join(b.Context(), actions.Member{ID: who, PID: os.Getpid()}); err != nil {
			b.Fatal(err)
		}
		holders[i] = actions.Agent(who)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				if _, err := board.Reserve(b.Context(), holders[i%len(holders)],
					actions.ReserveRequest{Repo: benchRepo, Patterns: []string{benchPattern(i)}, Reason: "bench"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Logf("%d reservations made in %v", n, time.Since(start).Round(time.Millisecond))
	return holders
}

// benchPattern is the i-th reservation's pattern: a package, a command's
// main file, a directory's Go files, a document.
func benchPattern(i int) string {
	switch i % 4 {
	case 0:
		return fmt.Sprintf("pkg/p%d/**", i)
	case 1:
		return fmt.Sprintf("cmd/c%d/main.go", i)
	case 2:
		return fmt.Sprintf("internal/i%d/*.go", i)
	}
	return fmt.Sprintf("docs/d%d.md", i)
}

func benchConflicts(b *testing.B, board actions.Board) {
	who := actions.Poster("user:guard")
	paths := [][]string{{"pkg/p400/sub/file.go"}, {"src/nobody/holds/this.go"}}
	check := func(i int) {
		rs, err := board.Conflicts(b.Context(), who, benchRepo, paths[i%2])
		if err != nil {
			b.Fatal(err)
		}
		if (len(rs) == 1) != (i%2 == 0) {
			b.Fatalf("conflicts for %v: %v", paths[i%2], rs)
		}
	}
	for i := range 100 { // warm up
		check(i)
	}
	measure(b, check)
}

// measure runs op b.N times and reports its latencies and this process's
// CPU per call.
func measure(b *testing.B, op func(i int)) {
	lat := make([]time.Duration, 0, b.N)
	cpu0 := boardtest.CPUTime(b, os.Getpid())
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		op(i)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	cpu := boardtest.CPUTime(b, os.Getpid()) - cpu0
	boardtest.ReportLatency(b, lat)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func benchReserve(b *testing.B, board actions.Board, who actions.Poster) {
	measure(b, func(i int) {
		if _, err := board.Reserve(b.Context(), who, actions.ReserveRequest{Repo: benchRepo,
			Patterns: []string{fmt.Sprintf("bench/r%d/**", i)}, Reason: "bench"}); err != nil {
			b.Fatal(err)
		}
	})
}

func benchPost(b *testing.B, board actions.Board) {
	measure(b, func(int) {
		if _, err := board.Post(b.Context(), "user:bench", actions.Draft{Title: "job", Body: "bench"}); err != nil {
			b.Fatal(err)
		}
	})
}
