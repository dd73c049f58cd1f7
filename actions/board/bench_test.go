package board

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks across processes. Run them without -race, for example:
//
//	go test -run '^$' -bench . ./actions/board/
//	BEE_BOARD_BENCH_IDLE=1 go test -run '^$' -bench IdleCPU -benchtime 1x -timeout 5m ./actions/board/
//
// BenchmarkIdleCPU takes 30 s and runs only when BEE_BOARD_BENCH_IDLE=1.

// BenchmarkWake measures post-to-claim latency across processes: another
// process posts while this one waits in Next (its safety poll set to 10 s,
// so only the notifier can wake it). The time runs from just before the
// other process calls Post to Next's return here, so it holds the post's
// transaction, the wake-up and the claim's transaction.
func BenchmarkWake(b *testing.B) {
	path := filepath.Join(b.TempDir(), "board.db")
	poster := startProc(b, "poster", path)
	poster.expect("ready", 30*time.Second)
	board, err := Open(path, &Options{
		SafetyPoll: 10 * time.Second,
		// Ask for the post only once Next is about to sleep.
		beforeSleep: func() { poster.send("post now") },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	who := mint(b, "bench")

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		p, err := board.Next(b.Context(), who, "", 5*time.Second)
		end := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Records) != 1 {
			b.Fatal("no wake-up within 5 s")
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(p.Records[0].Title, "t0="), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, end.Sub(time.Unix(0, ns)))
		if _, err := board.Finish(b.Context(), who, p.Records[0].ID, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(quantile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(lat, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	poster.finish(10 * time.Second)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// BenchmarkClaimRate measures claims per second with 8 processes claiming
// as fast as they can from one board, and how evenly they share: each
// round runs 2 s; min/max are one process's claims per second. It runs
// with the lock file (the board's default) and with SQLite's busy handler
// alone, for comparison.
func BenchmarkClaimRate(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noLock bool
	}{{"lockfile", false}, {"busyhandler", true}} {
		b.Run(mode.name, func(b *testing.B) {
			procs := 8
			if p, _ := strconv.Atoi(os.Getenv("BEE_BOARD_BENCH_PROCS")); p > 0 {
				procs = p
			}
			const round = 2 * time.Second
			var total, lo, hi float64
			for range b.N {
				path := filepath.Join(b.TempDir(), "board.db")
				board, err := Open(path, &Options{noWriteLock: mode.noLock})
				if err != nil {
					b.Fatal(err)
				}
				bulkPost(b, board, 60000)
				env := []string{fmt.Sprintf("%s=%d", envMS, round.Milliseconds())}
				if mode.noLock {
					env = append(env, envNoLock+"=1")
				}
				workers := make([]*proc, procs)
				for i := range workers {
					workers[i] = startProc(b, "rate", path, env...)
				}
				for _, w := range workers {
					w.expect("ready", 30*time.Second)
				}
				for _, w := range workers {
					w.send("go")
				}
				counts := make([]float64, procs)
				for i, w := range workers {
					f := strings.Fields(w.expect("count ", round+30*time.Second))
					n, _ := strconv.Atoi(f[1])
					counts[i] = float64(n) / round.Seconds()
					w.finish(10 * time.Second)
				}
				var sum float64
				for _, c := range counts {
					sum += c
				}
				b.Logf("%s: %.0f claims/s; per process %v", mode.name, sum, counts)
				total += sum
				lo += slices.Min(counts)
				hi += slices.Max(counts)
				if err := board.Close(); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(total/n, "claims/s")
			b.ReportMetric(lo/n, "min-proc-claims/s")
			b.ReportMetric(hi/n, "max-proc-claims/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// bulkPost adds n open actions for anyone in one transaction.
func bulkPost(tb testing.TB, b *Board, n int) {
	tb.Helper()
	_, err := b.db.Exec(`WITH RECURSIVE c (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
		INSERT INTO actions (to_whom, from_whom, title, state, posted_at, rev)
		SELECT '', 'user:bench', 'job ' || x, 'open', ?, x FROM c`, n, nowMS())
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkIdleCPU measures the CPU time 50 processes, each waiting in Next
// with the default options, use in 30 s of nothing happening (utime+stime
// from /proc/<pid>/stat, in clock ticks of 10 ms).
func BenchmarkIdleCPU(b *testing.B) {
	if os.Getenv("BEE_BOARD_BENCH_IDLE") != "1" {
		b.Skip("takes 30 s; set BEE_BOARD_BENCH_IDLE=1")
	}
	const procs = 50
	const span = 30 * time.Second
	path := filepath.Join(b.TempDir(), "board.db")
	board, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	waiters := make([]*proc, procs)
	for i := range waiters {
		waiters[i] = startProc(b, "waiter", path)
	}
	for _, w := range waiters {
		w.expect("sleeping", 60*time.Second)
	}
	time.Sleep(2 * time.Second) // let start-up work (GC, page faults) settle
	before := make([]int, procs)
	for i, w := range waiters {
		before[i] = cpuTicks(b, w.cmd.Process.Pid)
	}
	b.ResetTimer()
	time.Sleep(span)
	b.StopTimer()
	var total, worst int
	for i, w := range waiters {
		d := cpuTicks(b, w.cmd.Process.Pid) - before[i]
		total += d
		worst = max(worst, d)
	}
	ms := func(ticks int) float64 { return float64(ticks) * 10 }
	b.Logf("%d idle waiters over %v: %.0f ms CPU in all (%.3f%% of one core), worst process %.0f ms", procs, span, ms(total),
		100*ms(total)/float64(span.Milliseconds()), ms(worst))
	b.ReportMetric(ms(total), "cpu-ms-total")
	b.ReportMetric(ms(total)/procs, "cpu-ms-per-proc")
	b.ReportMetric(ms(worst), "cpu-ms-worst-proc")
	for _, w := range waiters {
		w.finish(30 * time.Second)
	}
}

// cpuTicks returns utime+stime of pid, in clock ticks.
func cpuTicks(tb testing.TB, pid int) int {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	rest := string(raw[strings.LastIndexByte(string(raw), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return utime + stime
}
