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

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
)

// Benchmarks across processes. Run them without -race, for example:
//
//	go test -run '^$' -bench . ./actions/board/
//	go test -run '^$' -bench 'Wake|Await' -benchtime 200x ./actions/board/
//	BEE_BOARD_BENCH_IDLE=1 go test -run '^$' -bench IdleCPU -benchtime 1x -timeout 5m ./actions/board/
//	go test -run '^$' -bench Fanout -benchtime 320x ./actions/board/
//	BEE_BOARD_BENCH_IDLE=1 BEE_BOARD_BENCH_PROCS=32 go test -run '^$' -bench IdleCPU -benchtime 1x ./actions/board/
//
// BenchmarkIdleCPU takes 30 s and runs only when BEE_BOARD_BENCH_IDLE=1.

// BenchmarkWake measures post-to-claim latency across processes: another
// process posts while this one waits in Next (its safety poll set to 10 s,
// so only the notifier can wake it). The time runs from just before the
// other process calls Post to Next's return here, so it holds the post's
// transaction, the wake-up and the claim's transaction.
func BenchmarkWake(b *testing.B) {
	path := filepath.Join(b.TempDir(), "board.db")
	poster := boardtest.StartProc(b, "poster", path)
	poster.Expect("ready", 30*time.Second)
	board, err := Open(path, &Options{
		SafetyPoll: 10 * time.Second,
		// Ask for the post only once Next is about to sleep.
		beforeSleep: func() { poster.Send("post now") },
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
	boardtest.ReportLatency(b, lat)
	poster.Finish(10 * time.Second)
}

// BenchmarkAwait measures finish-to-await latency across processes: this
// process awaits an action that another process holds, then asks it to
// finish the action; the time runs from just before the other process calls
// Finish to Await's return here (its safety poll set to 10 s, so only the
// notifier can wake it).
func BenchmarkAwait(b *testing.B) {
	path := filepath.Join(b.TempDir(), "board.db")
	worker := boardtest.StartProc(b, "worker", path)
	worker.Expect("ready ", 30*time.Second)
	var current string // the action awaited; only the awaiting goroutine reads it
	board, err := Open(path, &Options{
		SafetyPoll: 10 * time.Second,
		// Ask for the finish only once Await is about to sleep.
		beforeSleep: func() { worker.Send("finish " + current + " now") },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	poster := mint(b, "bench")

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r, err := board.Post(b.Context(), actions.Agent(poster), actions.Draft{To: "worker", Title: "job"})
		if err != nil {
			b.Fatal(err)
		}
		worker.Send("claim")
		worker.Expect("claimed "+r.ID, 10*time.Second)
		current = r.ID
		b.StartTimer()
		recs, err := board.Await(b.Context(), actions.Agent(poster), []string{r.ID}, 5*time.Second)
		end := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(recs) != 1 {
			b.Fatal("await did not return the finished action within 5 s")
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(recs[0].Result, "t0="), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, end.Sub(time.Unix(0, ns)))
		worker.Expect("ended "+r.ID, 10*time.Second)
	}
	b.StopTimer()
	boardtest.ReportLatency(b, lat)
	worker.Finish(10 * time.Second)
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
			var departMax time.Duration
			for range b.N {
				path := filepath.Join(b.TempDir(), "board.db")
				board, err := Open(path, &Options{noWriteLock: mode.noLock})
				if err != nil {
					b.Fatal(err)
				}
				bulkPost(b, board, 60000)
				env := []string{fmt.Sprintf("%s=%d", boardtest.EnvMS, round.Milliseconds())}
				if mode.noLock {
					env = append(env, envNoLock+"=1")
				}
				workers := make([]*boardtest.Proc, procs)
				for i := range workers {
					workers[i] = boardtest.StartProc(b, "rate", path, env...)
				}
				for _, w := range workers {
					w.Expect("ready", 30*time.Second)
				}
				for _, w := range workers {
					w.Send("go")
				}
				// Meanwhile, depart identities holding two claims each, as a
				// bridge does at its end, and time it under this load.
				departs := departUnderLoad(b, board, round)
				b.Logf("%s: Depart under load: %d departures, median %v, max %v", mode.name, len(departs),
					boardtest.Quantile(departs, 0.5), departs[len(departs)-1])
				departMax = max(departMax, departs[len(departs)-1])
				counts := make([]float64, procs)
				for i, w := range workers {
					f := strings.Fields(w.Expect("count ", round+30*time.Second))
					n, _ := strconv.Atoi(f[1])
					counts[i] = float64(n) / round.Seconds()
					w.Finish(10 * time.Second)
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
			b.ReportMetric(float64(departMax.Microseconds()), "depart-max-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// departUnderLoad joins an identity, claims two actions for it and
// departs it, again and again for d, and returns how long each Depart
// took, sorted.
func departUnderLoad(tb testing.TB, b *Board, d time.Duration) []time.Duration {
	tb.Helper()
	var took []time.Duration
	for end := time.Now().Add(d - 200*time.Millisecond); time.Now().Before(end); {
		who := mint(tb, "departing")
		if err := b.Join(tb.Context(), actions.Member{ID: who, PID: os.Getpid()}); err != nil {
			tb.Fatal(err)
		}
		for range 2 {
			if _, err := b.Next(tb.Context(), who, "", time.Second); err != nil {
				tb.Fatal(err)
			}
		}
		start := time.Now()
		if err := b.Depart(tb.Context(), who); err != nil {
			tb.Fatal(err)
		}
		took = append(took, time.Since(start))
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(took)
	return took
}

// BenchmarkDepart measures Depart of an identity holding three claims and
// with two more actions addressed to it, on a board nobody else uses.
func BenchmarkDepart(b *testing.B) {
	board, err := Open(filepath.Join(b.TempDir(), "board.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	ctx := b.Context()
	var took []time.Duration
	for range b.N {
		b.StopTimer()
		who := mint(b, "departing")
		if err := board.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
			b.Fatal(err)
		}
		for i := range 5 {
			to := ""
			if i >= 3 {
				to = string(who)
			}
			if _, err := board.Post(ctx, "user:bench", actions.Draft{To: to, Title: "job"}); err != nil {
				b.Fatal(err)
			}
		}
		for range 3 {
			if _, err := board.Next(ctx, who, "", time.Second); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		if err := board.Depart(ctx, who); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	boardtest.ReportLatency(b, took)
}

// bulkPost adds n open actions for anyone in one transaction.
func bulkPost(tb testing.TB, b *Board, n int) {
	tb.Helper()
	_, err := b.db.Exec(`WITH RECURSIVE c (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
		INSERT INTO actions (to_whom, from_whom, title, state, posted_at, rev)
		SELECT '', 'user:bench', 'job ' || x, 'open', ?, x FROM c`, n, b.nowMS())
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkIdleCPU measures the CPU time 50 processes (or
// $BEE_BOARD_BENCH_PROCS; 32 beside BenchmarkFanout), each joined and
// waiting in Next with the default options (a safety poll every 60 s; no
// lease renewal while holding nothing), use in 30 s of nothing happening:
// the run time of all their threads, from /proc/<pid>/task/*/schedstat, in
// nanoseconds.
func BenchmarkIdleCPU(b *testing.B) {
	if os.Getenv("BEE_BOARD_BENCH_IDLE") != "1" {
		b.Skip("takes 30 s; set BEE_BOARD_BENCH_IDLE=1")
	}
	procs := 50
	if p, _ := strconv.Atoi(os.Getenv("BEE_BOARD_BENCH_PROCS")); p > 0 {
		procs = p
	}
	const span = 30 * time.Second
	path := filepath.Join(b.TempDir(), "board.db")
	board, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	waiters := make([]*boardtest.Proc, procs)
	for i := range waiters {
		waiters[i] = boardtest.StartProc(b, "waiter", path)
	}
	for _, w := range waiters {
		w.Expect("sleeping", 60*time.Second)
	}
	time.Sleep(2 * time.Second) // let start-up work (GC, page faults) settle
	before := make([]time.Duration, procs)
	for i, w := range waiters {
		before[i] = boardtest.CPUTime(b, w.Pid())
	}
	b.ResetTimer()
	time.Sleep(span)
	b.StopTimer()
	var total, worst time.Duration
	for i, w := range waiters {
		d := boardtest.CPUTime(b, w.Pid()) - before[i]
		total += d
		worst = max(worst, d)
	}
	b.Logf("%d idle waiters over %v: %v CPU in all (%.4f%% of one core), %v per process, worst %v",
		procs, span, total, 100*total.Seconds()/span.Seconds(), total/time.Duration(procs), worst)
	b.ReportMetric(float64(total.Microseconds())/1000, "cpu-ms-total")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(procs), "cpu-ms-per-proc")
	b.ReportMetric(float64(worst.Microseconds())/1000, "cpu-ms-worst-proc")
	for _, w := range waiters {
		w.Finish(30 * time.Second)
	}
}

// BenchmarkFanout measures delivery when many bridges wait: 32 processes
// wait in Next, each under its own agent name, and this process posts
// actions addressed to them in turn, one at a time (the next once the
// previous recipient sleeps again). It reports post-to-claim latency (from
// just before Post here to the claim's return in the recipient, p50, p95,
// p99) and the CPU all 32 waiters spend per post, bystanders included:
// a post that wakes only its recipient leaves the other 31 asleep.
//
//	go test -run '^$' -bench Fanout -benchtime 320x ./actions/board/
func BenchmarkFanout(b *testing.B) {
	const procs = 32
	path := filepath.Join(b.TempDir(), "board.db")
	board, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	waiters := make([]*boardtest.Proc, procs)
	for i := range waiters {
		waiters[i] = boardtest.StartProc(b, "waiter", path, fmt.Sprintf("%s=fan%d", boardtest.EnvAgent, i))
	}
	for _, w := range waiters {
		w.Expect("sleeping", 60*time.Second)
	}
	cpu := func() time.Duration {
		var sum time.Duration
		for _, w := range waiters {
			sum += boardtest.CPUTime(b, w.Pid())
		}
		return sum
	}
	lat := make([]time.Duration, 0, b.N)
	before := cpu()
	b.ResetTimer()
	for i := range b.N {
		w := waiters[i%procs]
		t0 := time.Now()
		r, err := board.Post(b.Context(), "user:bench", actions.Draft{To: fmt.Sprintf("fan%d", i%procs), Title: "job"})
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(w.Expect("got "+r.ID+" ", 10*time.Second))
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Unix(0, ns).Sub(t0))
		w.Expect("sleeping", 10*time.Second)
	}
	b.StopTimer()
	spent := cpu() - before
	boardtest.ReportLatency(b, lat, 0.95)
	b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "waiters-cpu-µs/post")
	for _, w := range waiters {
		w.Finish(30 * time.Second)
	}
}

// BenchmarkListLive measures what `bee list` does by default on a board
// with a long history (20000 ended actions, 20 open): every page of the
// open and claimed actions, filtered in Go over List's pages (as before)
// or by the database (ListFiltered).
//
//	go test -run '^$' -bench ListLive ./actions/board/
func BenchmarkListLive(b *testing.B) {
	board, err := Open(filepath.Join(b.TempDir(), "board.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer board.Close()
	bulkPost(b, board, 20000)
	// Ended as the board ends them: moved to ended_actions.
	for _, q := range []string{
		`UPDATE actions SET state = 'done', holder = 'agent:x#01234567', done_at = posted_at WHERE seq % 1000 <> 0`,
		`INSERT INTO ended_actions (` + actionCols + `) SELECT ` + actionCols + ` FROM actions WHERE state = 'done'`,
		`DELETE FROM actions WHERE state = 'done'`,
	} {
		if _, err := board.db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	live := actions.ListFilter{States: []actions.State{actions.Open, actions.Claimed}}
	b.Run("go-filter", func(b *testing.B) {
		for range b.N {
			n := 0
			for cursor := actions.Cursor(""); ; {
				p, err := board.List(b.Context(), cursor)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Records) == 0 {
					break
				}
				for _, r := range p.Records {
					if !r.State.Ended() {
						n++
					}
				}
				cursor = p.Cursor
			}
			if n != 20 {
				b.Fatalf("%d live actions, want 20", n)
			}
		}
	})
	b.Run("db-filter", func(b *testing.B) {
		for range b.N {
			n := 0
			for cursor := actions.Cursor(""); ; {
				p, err := board.ListFiltered(b.Context(), cursor, live)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Records) == 0 {
					break
				}
				n += len(p.Records)
				cursor = p.Cursor
			}
			if n != 20 {
				b.Fatalf("%d live actions, want 20", n)
			}
		}
	})
}
