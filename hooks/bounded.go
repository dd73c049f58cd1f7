package hooks

import (
	"context"
	"errors"
	"time"
)

// bounded runs f on a context that ends after timeout, or with ctx, and
// returns what f returns; or, when f has not returned by then, late(cause),
// where cause is context.DeadlineExceeded when the timeout passed and ctx's
// cause otherwise; or, when f panics, panicked(the value). An f still
// blocked then (on a stdin that never closes, on a call that ignores its
// context) is abandoned in its goroutine, which is fine for a hook's
// process, about to exit.
func bounded[T any](ctx context.Context, timeout time.Duration, f func(context.Context) T, late func(cause error) T, panicked func(any) T) T {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan T, 1) // buffered: f may finish after its answer was given up on
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- panicked(r)
			}
		}()
		done <- f(ctx)
	}()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return late(context.DeadlineExceeded)
		}
		return late(context.Cause(ctx))
	}
}
