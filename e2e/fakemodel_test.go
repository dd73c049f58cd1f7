//go:build e2e

package e2e

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A fakeModel is what every fake model API (FakeAPI for Claude Code,
// ModelAPI for Codex and Gemini) keeps the same way: a server on
// 127.0.0.1, a script of steps (S) that the main conversation's requests
// take one each, and every request seen (R), numbered from 1, which WaitFor
// watches. Each API reads its requests and writes its turns itself.
type fakeModel[R any, S ~func(*R) Turn] struct {
	URL string

	t      testing.TB
	srv    *http.Server
	mu     sync.Mutex
	steps  []S
	reqs   []*R
	notify chan struct{} // closed and replaced on every change
	closed bool          // the test is over: log nothing more
}

// start serves handler on a free port of 127.0.0.1 until the test ends;
// what names the fake in a failure.
func (f *fakeModel[R, S]) start(t testing.TB, what string, handler http.HandlerFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%s: listen: %v", what, err)
	}
	f.URL, f.t, f.notify = "http://"+ln.Addr().String(), t, make(chan struct{})
	f.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		_ = f.srv.Close()
	})
}

// Push appends steps to the script.
func (f *fakeModel[R, S]) Push(steps ...S) {
	f.mu.Lock()
	f.steps = append(f.steps, steps...)
	f.changed()
	f.mu.Unlock()
}

// Pending reports how many steps are left.
func (f *fakeModel[R, S]) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.steps)
}

// Requests returns the requests so far (answered ones do not change).
func (f *fakeModel[R, S]) Requests() []*R {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*R(nil), f.reqs...)
}

// WaitFor polls cond over the requests until it holds or the timeout passes;
// it wakes on every request and answer. cond runs with the fake's lock held,
// so it may read every field of the requests; a request it returns may be
// read afterwards once answered (nothing changes it after that).
func (f *fakeModel[R, S]) WaitFor(timeout time.Duration, cond func(reqs []*R) bool) bool {
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok := cond(f.reqs)
		ch := f.notify
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// take records r, numbering it through number (under the lock, so that
// WaitFor never sees it unnumbered), and, for a request of the main
// conversation (side false), takes the script's next step (nil when none is
// left). closed says whether the test is over.
func (f *fakeModel[R, S]) take(r *R, number func(n int), side bool) (step S, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	number(len(f.reqs) + 1)
	f.reqs = append(f.reqs, r)
	if !side && len(f.steps) > 0 {
		step = f.steps[0]
		f.steps = f.steps[1:]
	}
	f.changed()
	return step, f.closed
}

// update runs change on a request under the lock and wakes WaitFor.
func (f *fakeModel[R, S]) update(change func()) {
	f.mu.Lock()
	change()
	f.changed()
	f.mu.Unlock()
}

func (f *fakeModel[R, S]) logf(format string, args ...any) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if !closed {
		f.t.Logf(format, args...)
	}
}

// changed wakes WaitFor; f.mu must be held.
func (f *fakeModel[R, S]) changed() {
	close(f.notify)
	f.notify = make(chan struct{})
}
