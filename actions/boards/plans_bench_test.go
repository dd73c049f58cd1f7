package boards

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
)

// BenchmarkPlans measures plans on each board, beside BenchmarkBoards
// (run the same way, without -race):
//
//		go test -run '^$' -bench Plans -benchtime 1x ./actions/boards/
//
//	  - post1000: a plan of 1,000 actions posted in one call (each waits
//	    for the first and the one before it), the mean and worst of 5.
//	  - wake: in one run, alternately, another process finishes the last
//	    prerequisite of an action this one waits for in Next (finish to
//	    Next's return: open-p50/p99) and posts an action it waits for
//	    (post to Next's return: post-p50/p99).
//	  - claims: claims per second of 8 processes claiming as fast as they
//	    can for 2 s from a stock of open actions all of one priority
//	    (flat), then from one whose priorities are drawn from 0..4
//	    (prio).
func BenchmarkPlans(b *testing.B) {
	for _, kind := range []string{"file", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			newBoard := func(b *testing.B) string {
				if kind == "file" {
					return filepath.Join(b.TempDir(), "board.db")
				}
				c := pgtest.Shared(b)
				return c.URL(c.NewDB(b))
			}
			b.Run("post1000", func(b *testing.B) { benchPost1000(b, newBoard(b)) })
			b.Run("wake", func(b *testing.B) { benchOpenWake(b, newBoard(b)) })
			b.Run("claims/flat", func(b *testing.B) { benchPriorityClaims(b, newBoard(b), false) })
			b.Run("claims/prio", func(b *testing.B) { benchPriorityClaims(b, newBoard(b), true) })
		})
	}
}

func benchPost1000(b *testing.B, location string) {
	board := openBench(b, location)
	plan := make([]actions.PlanEntry, actions.MaxPlan)
	for i := range plan {
		plan[i] = actions.PlanEntry{Key: fmt.Sprintf("k%d", i), Title: fmt.Sprintf("step %d", i), Body: "do step " + strconv.Itoa(i)}
		if i > 0 {
			plan[i].After = []string{"k0", fmt.Sprintf("k%d", i-1)}
		}
	}
	var took []time.Duration
	for range b.N {
		for range 5 {
			start := time.Now()
			if _, err := board.PostPlan(b.Context(), "user:bench", plan); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
	}
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(took)), "ms/plan")
	b.ReportMetric(float64(slices.Max(took).Milliseconds()), "max-ms/plan")
	b.ReportMetric(0, "ns/op")
}

func benchOpenWake(b *testing.B, location string) {
	board := openBench(b, location)
	worker := boardtest.StartProc(b, "worker", location)
	wid := strings.TrimPrefix(worker.Expect("ready ", 60*time.Second), "ready ")
	poster := boardtest.StartProc(b, "poster", location)
	poster.Expect("ready", 60*time.Second)
	who := boardtest.Mint(b, "bench")
	if err := board.Join(b.Context(), actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		b.Fatal(err)
	}
	var opened, posted []time.Duration
	for range b.N {
		for i := range 2 * rounds {
			var pre actions.Record
			if i%2 == 0 {
				pre = postPrerequisite(b, board, worker, wid, who)
			}
			got := make(chan actions.Page, 1)
			go func() {
				p, err := board.Next(b.Context(), who, "", 5*time.Second)
				if err != nil {
					b.Error(err)
				}
				got <- p
			}()
			time.Sleep(5 * time.Millisecond) // let Next fall asleep
			if i%2 == 0 {
				worker.Send("finish " + pre.ID + " now")
				worker.Expect("ended "+pre.ID, 10*time.Second)
			} else {
				poster.Send("post now")
			}
			p := <-got
			end := time.Now()
			if len(p.Records) != 1 {
				b.Fatal("no wake-up within 5 s")
			}
			if i%2 == 0 {
				opened = append(opened, end.Sub(t0Of(b, board, pre.ID, true)))
			} else {
				posted = append(posted, end.Sub(t0Of(b, board, p.Records[0].ID, false)))
			}
			if _, err := board.Finish(b.Context(), who, p.Records[0].ID, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	for name, lat := range map[string][]time.Duration{"open": opened, "post": posted} {
		slices.Sort(lat)
		for _, q := range []float64{0.5, 0.99} {
			b.ReportMetric(float64(boardtest.Quantile(lat, q).Microseconds()), fmt.Sprintf("%s-p%g-µs", name, 100*q))
		}
	}
	b.ReportMetric(0, "ns/op")
	worker.Finish(30 * time.Second)
	poster.Finish(30 * time.Second)
}

// postPrerequisite posts an action for the worker process (identity wid),
// which claims it, and one for who that waits for it; it returns the
// first.
func postPrerequisite(b *testing.B, board actions.Board, worker *boardtest.Proc, wid string, who identity.ID) actions.Record {
	b.Helper()
	pre, err := board.Post(b.Context(), "user:bench", actions.Draft{To: wid, Title: "prerequisite"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := board.Post(b.Context(), "user:bench", actions.Draft{To: string(who), Title: "waiter", After: []string{pre.ID}}); err != nil {
		b.Fatal(err)
	}
	worker.Send("claim")
	worker.Expect("claimed "+pre.ID, 10*time.Second)
	return pre
}

// t0Of reads the moment another process wrote as "t0=<unix ns>" into the
// result (or title) of id.
func t0Of(b *testing.B, board actions.Board, id string, result bool) time.Time {
	b.Helper()
	r, err := board.Get(b.Context(), id)
	if err != nil {
		b.Fatal(err)
	}
	text := r.Title
	if result {
		text = r.Result
	}
	ns, err := strconv.ParseInt(strings.TrimPrefix(text, "t0="), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, ns)
}

// benchPriorityClaims is BenchmarkBoards' claims, from a stock posted in
// plans of 1,000 (no prerequisites), of one priority or of priorities
// drawn from 0..4.
func benchPriorityClaims(b *testing.B, location string, prio bool) {
	const procs = 8
	const round = 2 * time.Second
	const stock = 30000
	var total float64
	for range b.N {
		board := openBench(b, location)
		plan := make([]actions.PlanEntry, actions.MaxPlan)
		for n := 0; n < stock; n += len(plan) {
			for i := range plan {
				p := actions.DefaultPriority
				if prio {
					p = rand.IntN(actions.MaxPriority + 1)
				}
				plan[i] = actions.PlanEntry{Key: fmt.Sprintf("k%d", i), Title: "job", Priority: &p}
			}
			if _, err := board.PostPlan(b.Context(), "user:bench", plan); err != nil {
				b.Fatal(err)
			}
		}
		_, sum := claimRates(b, location, procs, round, stock)
		b.Logf("%.0f claims/s", sum)
		total += sum
	}
	b.ReportMetric(total/float64(b.N), "claims/s")
	b.ReportMetric(0, "ns/op")
}
