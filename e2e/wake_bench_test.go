//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkWake measures wake on work through the real Claude Code, side by
// side with today's polling loop (the model calling bee_wait_action again
// and again, 45 s each), in one run:
//
//   - post-to-request latency: from `bee post` to the Messages API request
//     of the turn that takes the action, BEE_BENCH_WAKES posts each (default
//     10; p50 and p90). For
//     the waiter the session is idle and the post wakes it; for the polling
//     loop a bee_wait_action is in flight and returns the action.
//   - model requests per idle hour: both sessions are left idle for a
//     window (BEE_BENCH_IDLE, default 2m; a Go duration) and every request
//     the fake API gets is counted, then extrapolated to an hour. The
//     polling loop's count follows from its 45 s bound; the waiter's is 0
//     until its daily re-arm turn.
//
// One op is the whole measurement (two claude sessions, the posts, the idle
// window), so run it once:
//
//	go test -tags e2e -run '^$' -bench Wake -benchtime 1x -timeout 15m ./e2e/
func BenchmarkWake(b *testing.B) {
	idle := 2 * time.Minute
	if v := os.Getenv("BEE_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("BEE_BENCH_IDLE=%q: %v", v, err)
		}
		idle = d
	}
	wakes := 10
	if v := os.Getenv("BEE_BENCH_WAKES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BEE_BENCH_WAKES=%q: want a positive count", v)
		}
		wakes = n
	}
	for range b.N {
		benchWake(b, wakes, idle)
	}
}

func benchWake(b *testing.B, wakes int, idle time.Duration) {

	// The waiter: an interactive session, idle, with the hooks installed.
	w := NewEnv(b)
	w.AddBeeWithCLI()
	wx := w.StartWakeSession("waiter", w.WriteWakeSettings())
	w.waitArmed(1, 30*time.Second)

	// The polling loop: an interactive session without the waiter, whose
	// model waits, finishes what it gets, and waits again, forever.
	p := NewEnv(b)
	p.AddBeeWithCLI()
	px := p.StartTmuxNamed("poller", claudeBin, "--settings", p.WriteSettings(false))
	if !px.WaitReady(60 * time.Second) {
		b.Fatal("the polling session never showed its prompt")
	}
	var poll Step
	poll = func(r *APIRequest) Turn {
		p.API.Push(poll)
		tr, _ := r.LastToolResult()
		var page Page
		if json.Unmarshal([]byte(tr.Text), &page) == nil && len(page.Records) == 1 && page.Records[0].State == "claimed" {
			return Turn{Tool: toolFinish, Input: map[string]any{"id": page.Records[0].IDValue(), "result": "polled"}}
		}
		return Turn{Tool: toolWait, Input: map[string]any{"timeoutSeconds": 45}}
	}
	p.API.Push(poll)
	px.Submit("Wait for bee actions and do them, forever.")
	p.MustToolCall(toolWait, 1, 60*time.Second)

	var waiterLat, pollLat []time.Duration
	for i := range wakes {
		// Waiter: idle and armed; a post wakes it.
		w.waitArmed(1, 30*time.Second)
		done := fmt.Sprintf("bench-done-%d", i)
		w.takeAndFinish(toolWait, toolFinish, done)
		_, _, took := w.wakeFor("e2e", fmt.Sprintf("bench: wake %d", i))
		waiterLat = append(waiterLat, took)
		if !wx.WaitScreen(30*time.Second, done) {
			b.Fatalf("woken turn %d did not finish", i)
		}

		// Polling loop: a wait is in flight; a post ends it.
		waitInFlight(b, p)
		before := p.lastN()
		start := time.Now()
		rec := p.Post(fmt.Sprintf("bench: poll %d", i), "body", "--to", "e2e")
		var got *APIRequest
		if !p.API.WaitFor(30*time.Second, func(reqs []*APIRequest) bool {
			for _, r := range reqs {
				if r.N > before && !r.Side {
					if tr, ok := r.LastToolResult(); ok && containsAll(tr.Text, `"`+rec.IDString()+`"`) {
						got = r
						return true
					}
				}
			}
			return false
		}) {
			b.Fatalf("the polling loop did not get %s within 30 s", rec.IDString())
		}
		pollLat = append(pollLat, got.At.Sub(start))
		if !eventually(30*time.Second, func() bool { return p.Show(rec.IDString()).State == "done" }) {
			b.Fatalf("the polling loop did not finish %s", rec.IDString())
		}
	}
	// Idle, side by side: count every request each session makes.
	w.waitArmed(1, 30*time.Second)
	waitInFlight(b, p)
	var wg sync.WaitGroup
	var waiterReqs, pollReqs int
	for _, c := range []struct {
		e *Env
		n *int
	}{{w, &waiterReqs}, {p, &pollReqs}} {
		wg.Go(func() {
			before := c.e.lastN()
			time.Sleep(idle)
			*c.n = c.e.lastN() - before
		})
	}
	wg.Wait()
	perHour := func(n int) float64 { return float64(n) * float64(time.Hour) / float64(idle) }

	b.ReportMetric(ms(percentile(waiterLat, 50)), "waiter-p50-ms")
	b.ReportMetric(ms(percentile(waiterLat, 90)), "waiter-p90-ms")
	b.ReportMetric(ms(percentile(pollLat, 50)), "poll-p50-ms")
	b.ReportMetric(ms(percentile(pollLat, 90)), "poll-p90-ms")
	b.ReportMetric(perHour(waiterReqs), "waiter-req/idle-h")
	b.ReportMetric(perHour(pollReqs), "poll-req/idle-h")
	b.Logf("post to model request, %d posts each: waiter p50 %v p90 %v (all %v); polling loop p50 %v p90 %v (all %v)",
		wakes, percentile(waiterLat, 50), percentile(waiterLat, 90), waiterLat, percentile(pollLat, 50), percentile(pollLat, 90), pollLat)
	b.Logf("idle for %v: waiter %d request(s), polling loop %d; extrapolated to an hour: %.0f and %.0f (plus the waiter's one re-arm turn a day)",
		idle, waiterReqs, pollReqs, perHour(waiterReqs), perHour(pollReqs))

	for _, x := range []*Tmux{wx, px} {
		x.Key("Escape")
		x.Submit("/exit")
		if !eventually(15*time.Second, x.Dead) {
			b.Fatal("claude did not exit after /exit")
		}
	}
}

// waitInFlight waits until the polling session's last main request was
// answered with a bee_wait_action call whose result has not come back yet.
func waitInFlight(b *testing.B, p *Env) {
	b.Helper()
	if !p.API.WaitFor(30*time.Second, func(reqs []*APIRequest) bool {
		for i := len(reqs) - 1; i >= 0; i-- {
			if r := reqs[i]; !r.Side {
				return !r.Answered.IsZero() && r.Answer.Tool == toolWait
			}
		}
		return false
	}) {
		b.Fatal("the polling loop has no bee_wait_action in flight")
	}
	time.Sleep(300 * time.Millisecond) // the call reaches the bridge
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
