package boards

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
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
// own cost plus a loopback round trip, not a network's.

const (
	roleEnv     = "BEE_BOARDS_BENCH_ROLE"
	envLocation = "BEE_BOARDS_BENCH_LOCATION"
	envMS       = "BEE_BOARDS_BENCH_MS"
	envAgent    = "BEE_BOARDS_BENCH_AGENT"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	pgtest.StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// BenchmarkBoards measures, on each board:
//
//   - wake: post-to-claim latency across processes: another process posts
//     while this one waits in Next; from just before the other process
//     calls Post to Next's return here (p50, p99).
//   - claims: claims per second of 8 processes claiming as fast as they can
//     for 2 s, and the slowest and fastest process's share (none starved).
//   - await: finish-to-await latency: another process finishes an action
//     while this one waits in Await; from just before Finish to Await's
//     return (p50, p99).
//   - fanout: 32 processes wait in Next, each under its own agent name,
//     and this one posts to them in turn; post-to-claim latency in the
//     recipient (p50, p95, p99) and the CPU all 32 spend per post.
func BenchmarkBoards(b *testing.B) {
	for _, kind := range []string{"file", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			newBoard := func(b *testing.B) string {
				if kind == "file" {
					return filepath.Join(b.TempDir(), "board.db")
				}
				c := pgtest.Shared(b)
				return c.URL(c.NewDB(b))
			}
			b.Run("wake", func(b *testing.B) { benchWake(b, newBoard(b)) })
			b.Run("claims", func(b *testing.B) { benchClaims(b, newBoard(b)) })
			b.Run("await", func(b *testing.B) { benchAwait(b, newBoard(b)) })
			b.Run("fanout", func(b *testing.B) { benchFanout(b, newBoard(b)) })
		})
	}
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

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	b.ReportMetric(float64(q(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(q(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	b.ReportMetric(0, "ns/op")
}

const rounds = 200 // latency samples per run

func benchWake(b *testing.B, location string) {
	board := openBench(b, location)
	poster := startProc(b, "poster", location)
	poster.expect("ready", 60*time.Second)
	who := mint(b, "bench")
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
			poster.send("post now")
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
	report(b, lat)
	poster.finish(30 * time.Second)
}

func benchClaims(b *testing.B, location string) {
	const procs = 8
	const round = 2 * time.Second
	var total, lo, hi float64
	for range b.N {
		board := openBench(b, location)
		// Enough for 2 s of claiming by both boards here; posted by 4
		// goroutines.
		const stock = 30000
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := g; i < stock; i += 4 {
					if _, err := board.Post(b.Context(), "user:bench", actions.Draft{Title: "job"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		workers := make([]*proc, procs)
		for i := range workers {
			workers[i] = startProc(b, "rate", location, fmt.Sprintf("%s=%d", envMS, round.Milliseconds()))
		}
		for _, w := range workers {
			w.expect("ready", 60*time.Second)
		}
		for _, w := range workers {
			w.send("go")
		}
		counts := make([]float64, procs)
		sum := 0.0
		for i, w := range workers {
			f := strings.Fields(w.expect("count ", round+60*time.Second))
			n, _ := strconv.Atoi(f[1])
			counts[i] = float64(n) / round.Seconds()
			sum += counts[i]
			w.finish(30 * time.Second)
		}
		if sum*round.Seconds() >= stock {
			b.Logf("the %d actions ran out: the rate is a floor", stock)
		}
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

func benchAwait(b *testing.B, location string) {
	board := openBench(b, location)
	worker := startProc(b, "worker", location)
	worker.expect("ready", 60*time.Second)
	poster := mint(b, "lead")
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
			worker.send("claim")
			worker.expect("claimed "+r.ID, 10*time.Second)
			got := make(chan []actions.Record, 1)
			go func() {
				recs, err := board.Await(b.Context(), actions.Agent(poster), []string{r.ID}, 5*time.Second)
				if err != nil {
					b.Error(err)
				}
				got <- recs
			}()
			time.Sleep(5 * time.Millisecond) // let Await fall asleep
			worker.send("finish " + r.ID)
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
	report(b, lat)
	worker.finish(30 * time.Second)
}

func benchFanout(b *testing.B, location string) {
	const procs = 32
	board := openBench(b, location)
	waiters := make([]*proc, procs)
	for i := range waiters {
		waiters[i] = startProc(b, "waiter", location, fmt.Sprintf("%s=fan%d", envAgent, i))
	}
	for _, w := range waiters {
		w.expect("ready", 60*time.Second)
	}
	time.Sleep(time.Second) // let every waiter fall asleep in Next
	cpu := func() time.Duration {
		var sum time.Duration
		for _, w := range waiters {
			sum += cpuTime(b, w.cmd.Process.Pid)
		}
		return sum
	}
	var lat []time.Duration
	before := cpu()
	for range b.N {
		for i := range 10 * procs {
			t0 := time.Now()
			r, err := board.Post(b.Context(), "user:bench", actions.Draft{To: fmt.Sprintf("fan%d", i%procs), Title: "job"})
			if err != nil {
				b.Fatal(err)
			}
			f := strings.Fields(waiters[i%procs].expect("got "+r.ID+" ", 10*time.Second))
			ns, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Unix(0, ns).Sub(t0))
		}
	}
	spent := cpu() - before
	report(b, lat)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[min(len(lat)-1, int(0.95*float64(len(lat))))].Microseconds()), "p95-µs")
	b.ReportMetric(float64(spent.Microseconds())/float64(len(lat)), "waiters-cpu-µs/post")
	for _, w := range waiters {
		w.finish(30 * time.Second)
	}
}

// cpuTime returns the time all threads of pid have run on a CPU.
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("no schedstat for %d: %v", pid, err)
	}
	var sum time.Duration
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			tb.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

func mint(tb testing.TB, name string) identity.ID {
	tb.Helper()
	id, err := identity.Mint(name)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// runRole runs a role on the board at $BEE_BOARDS_BENCH_LOCATION: poster
// ("post now" posts an action titled t0=<unix ns>), rate (on "go", claims
// for BEE_BOARDS_BENCH_MS and reports "count <n>"), worker ("claim" claims
// an action for agent worker; "finish <id>" finishes it with result
// t0=<unix ns>).
func runRole(role string) error {
	board, err := Open(os.Getenv(envLocation), nil)
	if err != nil {
		return err
	}
	defer board.Close()
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	name := map[string]string{"rate": "rate", "worker": "worker", "waiter": os.Getenv(envAgent)}[role]
	var who identity.ID
	if name != "" {
		if who, err = identity.Mint(name); err != nil {
			return err
		}
		if err := board.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
			return err
		}
		defer board.Depart(context.WithoutCancel(ctx), who)
	}
	say("ready")
	if role == "waiter" {
		// Waits in Next, reporting "got <id> <unix ns>" per claim, until
		// stdin closes.
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			defer cancel()
			for in.Scan() {
			}
		}()
		for {
			p, err := board.Next(wctx, who, "", time.Minute)
			if wctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			for _, r := range p.Records {
				say("got %s %d", r.ID, time.Now().UnixNano())
				if _, err := board.Finish(ctx, who, r.ID, ""); err != nil {
					return err
				}
			}
		}
	}
	for in.Scan() {
		cmd := in.Text()
		switch {
		case role == "poster" && cmd == "post now":
			if _, err := board.Post(ctx, "user:bench", actions.Draft{Title: "t0=" + strconv.FormatInt(time.Now().UnixNano(), 10)}); err != nil {
				return err
			}
		case role == "rate" && cmd == "go":
			ms, _ := strconv.Atoi(os.Getenv(envMS))
			count := 0
			for end := time.Now().Add(time.Duration(ms) * time.Millisecond); time.Now().Before(end); {
				p, err := board.Next(ctx, who, "", 100*time.Millisecond)
				if err != nil {
					return err
				}
				count += len(p.Records)
			}
			say("count %d", count)
		case role == "worker" && cmd == "claim":
			p, err := board.Next(ctx, who, "", 10*time.Second)
			if err != nil || len(p.Records) == 0 {
				return fmt.Errorf("nothing claimed: %v", err)
			}
			say("claimed %s", p.Records[0].ID)
		case role == "worker" && strings.HasPrefix(cmd, "finish "):
			id := strings.TrimPrefix(cmd, "finish ")
			if _, err := board.Finish(ctx, who, id, "t0="+strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("role %s: unknown command %q", role, cmd)
		}
	}
	return in.Err()
}

// A proc is a role running in a child process.
type proc struct {
	tb     testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
	stderr strings.Builder
}

func startProc(tb testing.TB, role, location string, env ...string) *proc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, envLocation+"="+location)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{tb: tb, cmd: cmd, lines: make(chan string, 1<<10), exited: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

func (p *proc) expect(prefix string, timeout time.Duration) string {
	p.tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				p.tb.Fatalf("child exited before saying %q; stderr:\n%s", prefix, p.stderr.String())
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-t.C:
			p.tb.Fatalf("child did not say %q within %v", prefix, timeout)
		}
	}
}

func (p *proc) send(line string) {
	p.tb.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.tb.Fatal(err)
	}
}

func (p *proc) finish(timeout time.Duration) {
	p.tb.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.tb.Fatalf("child did not exit within %v", timeout)
	}
}
