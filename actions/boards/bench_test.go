package boards

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// Benchmarks of both boards side by side, each measure a sub-benchmark per
// board, across processes (the test binary re-executed in a role). Run
// them without -race:
//
//	go test -run '^$' -bench Boards -benchtime 1x ./actions/boards/
//
// The PostgreSQL board runs on a throwaway cluster the benchmark starts
// (or $BEE_TEST_POSTGRES), on this machine: the numbers are the board's
// own cost plus a loopback round trip, not a network's. $BEE_BENCH_PG
// says which cluster: "durable" (the default: fsync, synchronous_commit
// and full_page_writes on, as users run PostgreSQL, so every commit waits
// for the disk), "fast" (the tests' cluster, all three off), or "both".
// The sub-benchmark's name says which it ran on: postgres-durable,
// postgres-fast.

func TestMain(m *testing.M) {
	// The benchmarks re-execute the test binary as boardtest's worker
	// roles, on the board boards.Open opens.
	boardtest.RunRole(func(_, location string, _ *boardtest.Out) (actions.Board, error) {
		return Open(location, nil)
	}, nil)
	pgtest.Main(m) // stops the PostgreSQL cluster a test may have started
}

// BenchmarkBoards measures, on each board:
//
//   - wake: post-to-claim latency across processes: another process posts
//     while this one waits in Next; from just before the other process
//     calls Post to Next's return here (p50, p99).
//   - claims-N: claims per second of N processes (1, 8, 32) claiming as
//     fast as they can for 2 s, and the slowest and fastest process's
//     share (none starved).
//   - await: finish-to-await latency: another process finishes an action
//     while this one waits in Await; from just before Finish to Await's
//     return (p50, p99).
//   - fanout: 32 processes ($BEE_BENCH_FANOUT to change it) wait in
//     Next, each under its own agent name, and this one posts to them in
//     turn; post-to-claim latency in the
//     recipient (p50, p95, p99), the CPU all 32 spend per post and how
//     often their threads ran per post (a waiter a post does not concern
//     should not run at all), and what the same span would have cost
//     them had nothing been posted (the -idle- figures).
func BenchmarkBoards(b *testing.B) {
	for _, kind := range benchBoardKinds(b) {
		b.Run(kind, func(b *testing.B) {
			newBoard := func(b *testing.B) string { return newBenchBoard(b, kind) }
			b.Run("wake", func(b *testing.B) { benchWake(b, newBoard(b)) })
			for _, procs := range []int{1, 8, 32} {
				b.Run(fmt.Sprintf("claims-%d", procs), func(b *testing.B) { benchClaims(b, newBoard(b), procs) })
			}
			b.Run("await", func(b *testing.B) { benchAwait(b, newBoard(b)) })
			b.Run("fanout", func(b *testing.B) { benchFanout(b, newBoard(b)) })
		})
	}
}

// EnvBenchPG names the variable that says which PostgreSQL cluster the
// benchmarks run on: "durable" (the default), "fast" or "both".
const EnvBenchPG = "BEE_BENCH_PG"

// benchBoardKinds are the boards a benchmark runs on: "file", then
// "postgres-durable" and/or "postgres-fast" as $BEE_BENCH_PG says.
func benchBoardKinds(b *testing.B) []string {
	switch v := os.Getenv(EnvBenchPG); v {
	case "", "durable":
		return []string{"file", "postgres-durable"}
	case "fast":
		return []string{"file", "postgres-fast"}
	case "both":
		return []string{"file", "postgres-durable", "postgres-fast"}
	default:
		b.Fatalf("%s=%q: want durable, fast or both", EnvBenchPG, v)
		return nil
	}
}

// newBenchBoard is the location of a new, empty board of kind (see
// benchBoardKinds).
func newBenchBoard(b *testing.B, kind string) string {
	var c *pgtest.Cluster
	switch kind {
	case "file":
		return filepath.Join(b.TempDir(), "board.db")
	case "postgres-durable":
		c = pgtest.SharedDurable(b)
	default:
		c = pgtest.Shared(b)
	}
	return c.URL(c.NewDB(b))
}

func openBench(b *testing.B, location string) actions.Board {
	b.Helper()
	board, err := Open(location, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = board.Close() })
	return board
}

const rounds = 200 // latency samples per run

func benchWake(b *testing.B, location string) {
	board := openBench(b, location)
	poster := boardtest.StartProc(b, "poster", location)
	poster.Expect("ready", 60*time.Second)
	who := boardtest.Mint(b, "bench")
	var lat []time.Duration
	for range b.N {
		for range rounds {
			got := make(chan actions.Page, 1)
			go func() {
				p, err := board.Next(b.Context(), who, "", 5*time.Second)
				if err != nil {
					b.Error(err)
				}
				got <- p
			}()
			time.Sleep(5 * time.Millisecond) // let Next fall asleep
			poster.Send("post now")
			p := <-got
			end := time.Now()
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
	}
	boardtest.ReportLatency(b, lat)
	b.ReportMetric(0, "ns/op")
	poster.Finish(30 * time.Second)
}

func benchClaims(b *testing.B, location string, procs int) {
	const round = 2 * time.Second
	var total, lo, hi float64
	for range b.N {
		board := openBench(b, location)
		// Enough for 2 s of claiming by both boards here, posted as plans
		// of actions.MaxPlan independent entries: one commit each, so
		// that a durable cluster's flush per commit does not make the
		// stocking outlast the measure.
		const stock = 30000
		for i := 0; i < stock; i += actions.MaxPlan {
			plan := make([]actions.PlanEntry, actions.MaxPlan)
			for j := range plan {
				plan[j] = actions.PlanEntry{Key: fmt.Sprintf("j%d", j), Title: "job"}
			}
			if _, err := board.PostPlan(b.Context(), "user:bench", plan); err != nil {
				b.Fatal(err)
			}
		}
		counts, sum := claimRates(b, location, procs, round, stock)
		b.Logf("%.0f claims/s; per process %v", sum, counts)
		total += sum
		lo += slices.Min(counts)
		hi += slices.Max(counts)
	}
	n := float64(b.N)
	b.ReportMetric(total/n, "claims/s")
	b.ReportMetric(lo/n, "min-proc-claims/s")
	b.ReportMetric(hi/n, "max-proc-claims/s")
	b.ReportMetric(0, "ns/op")
}

// claimRates starts procs processes that claim (without finishing) as
// fast as they can for round, from a stock of open actions on location,
// and returns each one's claims per second and their sum.
func claimRates(b *testing.B, location string, procs int, round time.Duration, stock int) (counts []float64, sum float64) {
	workers := make([]*boardtest.Proc, procs)
	for i := range workers {
		workers[i] = boardtest.StartProc(b, "rate", location, fmt.Sprintf("%s=%d", boardtest.EnvMS, round.Milliseconds()))
	}
	for _, w := range workers {
		w.Expect("ready", 60*time.Second)
	}
	for _, w := range workers {
		w.Send("go")
	}
	counts = make([]float64, procs)
	for i, w := range workers {
		f := strings.Fields(w.Expect("count ", round+60*time.Second))
		n, _ := strconv.Atoi(f[1])
		counts[i] = float64(n) / round.Seconds()
		sum += counts[i]
		w.Finish(30 * time.Second)
	}
	if sum*round.Seconds() >= float64(stock) {
		b.Logf("the %d actions ran out: the rate is a floor", stock)
	}
	return counts, sum
}

func benchAwait(b *testing.B, location string) {
	board := openBench(b, location)
	worker := boardtest.StartProc(b, "worker", location)
	worker.Expect("ready", 60*time.Second)
	poster := boardtest.Mint(b, "lead")
	if err := board.Join(b.Context(), actions.Member{ID: poster, PID: os.Getpid()}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for range b.N {
		for range rounds {
			r, err := board.Post(b.Context(), actions.Agent(poster), actions.Draft{To: "worker", Title: "job"})
			if err != nil {
				b.Fatal(err)
			}
			worker.Send("claim")
			worker.Expect("claimed "+r.ID, 10*time.Second)
			got := make(chan []actions.Record, 1)
			go func() {
				recs, err := board.Await(b.Context(), actions.Agent(poster), []string{r.ID}, 5*time.Second)
				if err != nil {
					b.Error(err)
				}
				got <- recs
			}()
			time.Sleep(5 * time.Millisecond) // let Await fall asleep
			worker.Send("finish " + r.ID + " now")
			recs := <-got
			end := time.Now()
			if len(recs) != 1 {
				b.Fatal("await did not return the outcome within 5 s")
			}
			ns, err := strconv.ParseInt(strings.TrimPrefix(recs[0].Result, "t0="), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, end.Sub(time.Unix(0, ns)))
		}
	}
	boardtest.ReportLatency(b, lat)
	b.ReportMetric(0, "ns/op")
	worker.Finish(30 * time.Second)
}

// EnvBenchFanout names the variable that sets how many waiting processes
// the fanout benchmark posts to: 32 when unset, to compare with fewer
// (what grows with their number).
const EnvBenchFanout = "BEE_BENCH_FANOUT"

func benchFanout(b *testing.B, location string) {
	procs := 32
	if v := os.Getenv(EnvBenchFanout); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a number of processes, at least 1", EnvBenchFanout, v)
		}
		procs = n
	}
	board := openBench(b, location)
	waiters := make([]*boardtest.Proc, procs)
	for i := range waiters {
		waiters[i] = boardtest.StartProc(b, "waiter", location, fmt.Sprintf("%s=fan%d", boardtest.EnvAgent, i))
	}
	for _, w := range waiters {
		w.Expect("ready", 60*time.Second)
	}
	time.Sleep(time.Second) // let every waiter fall asleep in Next
	use := func() schedUse {
		var sum schedUse
		for _, w := range waiters {
			sum = sum.plus(schedUseOf(b, w.Pid()))
		}
		return sum
	}
	// What the waiters spend asleep, posted nothing: leases, polls, the
	// runtime's own timers.
	const idleSpan = 2 * time.Second
	idleFrom := use()
	time.Sleep(idleSpan)
	idle := use().minus(idleFrom)
	var lat []time.Duration
	before, start := use(), time.Now()
	for range b.N {
		for i := range 10 * procs {
			t0 := time.Now()
			r, err := board.Post(b.Context(), "user:bench", actions.Draft{To: fmt.Sprintf("fan%d", i%procs), Title: "job"})
			if err != nil {
				b.Fatal(err)
			}
			f := strings.Fields(waiters[i%procs].Expect("got "+r.ID+" ", 10*time.Second))
			ns, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Unix(0, ns).Sub(t0))
		}
	}
	spent, span := use().minus(before), time.Since(start)
	posts := float64(len(lat))
	boardtest.ReportLatency(b, lat, 0.95)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(spent.cpu.Microseconds())/posts, "waiters-cpu-µs/post")
	// The same span asleep would have cost this much of it; the rest is
	// what the posts cost, of which the addressee's claim and finish are
	// a share.
	idlePerPost := float64(idle.cpu.Microseconds()) * span.Seconds() / idleSpan.Seconds() / posts
	b.ReportMetric(idlePerPost, "waiters-idle-cpu-µs/post")
	// Runs on a CPU, summed over the waiters' threads: a waiter that a
	// post does not concern and stays asleep adds none.
	b.ReportMetric(float64(spent.runs)/posts, "waiters-runs/post")
	b.ReportMetric(float64(idle.runs)*span.Seconds()/idleSpan.Seconds()/posts, "waiters-idle-runs/post")
	for _, w := range waiters {
		w.Finish(30 * time.Second)
	}
}

// schedUse is what a process's threads have had of the CPU: the time they
// ran and the number of times they were put on a CPU to run.
type schedUse struct {
	cpu  time.Duration
	runs int64
}

func (u schedUse) plus(v schedUse) schedUse  { return schedUse{u.cpu + v.cpu, u.runs + v.runs} }
func (u schedUse) minus(v schedUse) schedUse { return schedUse{u.cpu - v.cpu, u.runs - v.runs} }

// schedUseOf sums Linux's /proc/PID/task/*/schedstat (time on a CPU in
// ns, time waiting for one, runs) over the threads of process pid.
func schedUseOf(b *testing.B, pid int) schedUse {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no schedstat for %d: %v", pid, err)
	}
	var sum schedUse
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(raw))
		if len(f) < 3 {
			b.Fatalf("%s: %q: want three fields", task, raw)
		}
		ns, err1 := strconv.ParseInt(f[0], 10, 64)
		runs, err2 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			b.Fatalf("%s: %v", task, err)
		}
		sum = sum.plus(schedUse{time.Duration(ns), runs})
	}
	return sum
}
