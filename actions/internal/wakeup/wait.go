package wakeup

import (
	"context"
	"fmt"
	"time"
)

// A Waiter is what a board's waiting calls (Changes, Await) share: the
// loop that looks, and when it finds nothing sleeps until it is woken, the
// safety poll passes or the call ends, then looks again.
type Waiter struct {
	Board       context.Context // the board's lifetime: ends when it closes
	Closed      func() error    // the error a call of the closed board returns
	Poll        time.Duration   // the safety poll: the longest sleep between two looks
	BeforeSleep func()          // called before each sleep, when set (a test's hook)
}

// Wait calls look until it finds something, fails, or timeout passes. It
// takes the channel wake returns before each look, so that a change after
// the look is never missed, and sleeps until that channel closes, the
// safety poll (or nap, when look returns one above 0) passes, ctx ends or
// the board closes.
//
// It returns what look found and true; on timeout the zero T and false;
// ctx's error when ctx ends first, w.Closed's when the board closes, and
// look's error (prefixed with op) otherwise. look runs with ctx bounded by
// timeout.
func Wait[T any](ctx context.Context, w Waiter, op string, timeout time.Duration, wake func() <-chan struct{},
	look func(ctx context.Context) (v T, found bool, nap time.Duration, err error)) (T, bool, error) {
	var none T
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		woken := wake() // before looking, so no change is missed
		v, found, nap, err := look(wctx)
		switch {
		case ctx.Err() != nil:
			return none, false, ctx.Err()
		case w.Board.Err() != nil:
			return none, false, w.Closed()
		case wctx.Err() != nil:
			return none, false, nil
		case err != nil:
			return none, false, fmt.Errorf("%s: %w", op, err)
		case found:
			return v, true, nil
		}
		if nap <= 0 {
			nap = w.Poll
		}
		if w.BeforeSleep != nil {
			w.BeforeSleep()
		}
		t := time.NewTimer(nap)
		select {
		case <-woken:
		case <-t.C:
		case <-wctx.Done():
		case <-w.Board.Done():
		}
		t.Stop()
	}
}
