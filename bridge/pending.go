package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/logkey"
)

// A Pending is a Session still being set up. The bridge answers the MCP
// handshake at once and opens its action source meanwhile (a board file
// takes tens of milliseconds to open); each tool call waits for the
// session, and when setting it up failed, every call says why.
type Pending struct {
	done chan struct{}
	s    *Session
	err  error
	// retrying holds the last error of a setup that is being retried.
	retrying atomic.Pointer[error]
}

// Ready returns a Pending that already holds s.
func Ready(s *Session) *Pending {
	p := &Pending{done: make(chan struct{}), s: s}
	close(p.done)
	return p
}

// Bounds on the pause between two attempts to set the session up.
const (
	retryFirst = 250 * time.Millisecond
	retryMax   = 5 * time.Second
)

// Start opens the source with open and starts a session on it, in a
// goroutine that ends when that is done, has failed, or ctx ends. An
// attempt that fails with a temporary error (one that is or wraps an error
// with a Temporary method reporting true, as the board's ErrLocked does:
// another process holds the board, and may be stopped or hung) is logged
// and tried again after a pause that doubles up to retryMax, for as long as
// ctx lasts; meanwhile Wait says why. Any other error ends the setup, and
// every Wait returns it. cfg.Source is ignored.
func Start(ctx context.Context, cfg Config, open func() (actions.Source, error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	go func() {
		defer close(p.done)
		pause := retryFirst
		for attempt := 1; ; attempt++ {
			src, err := open()
			if err == nil {
				cfg.Source = src
				if p.s, err = NewSession(ctx, cfg); err == nil {
					return
				}
				src.Close()
			}
			var temp interface{ Temporary() bool }
			if !errors.As(err, &temp) || !temp.Temporary() || ctx.Err() != nil {
				p.err = err
				return
			}
			p.retrying.Store(&err)
			log.Warn("bee cannot set up its session yet; retrying", "attempt", attempt, "pause", pause, logkey.Err, err)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				p.err = err
				return
			}
			pause = min(2*pause, retryMax)
		}
	}()
	return p
}

// Wait returns the session once it is set up, the error that stopped it,
// or, when ctx ends first, an error wrapping ctx's that says why the setup
// is taking long: the error it is retrying, or that it is still starting.
func (p *Pending) Wait(ctx context.Context) (*Session, error) {
	select {
	case <-p.done:
		return p.s, p.err
	case <-ctx.Done():
		if err := p.retrying.Load(); err != nil {
			return nil, retryingError{*err, ctx.Err()}
		}
		return nil, fmt.Errorf("bee is still starting: %w", ctx.Err())
	}
}

// A retryingError is Wait's answer while the setup retries: it reads as the
// error being retried, and wraps both it and the context's error.
type retryingError struct{ last, ctx error }

func (e retryingError) Error() string   { return e.last.Error() + "; bee keeps retrying" }
func (e retryingError) Unwrap() []error { return []error{e.last, e.ctx} }

// Retire waits for the session and retires its identity; it implements
// clearctl.Retirer.
func (p *Pending) Retire(ctx context.Context, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
	s, err := p.Wait(ctx)
	if err != nil {
		return clearctl.RetireResponse{}, err
	}
	return s.Retire(ctx, req)
}
