package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
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
// and tried again after a pause that doubles up to retryMax; meanwhile
// Wait says why. Any other error ends the setup, and every Wait returns
// it. cfg.Source is ignored.
//
// ctx bounds the setup: once it ends, the setup is abandoned (a retry
// too), and a session whose setup finishes after that departs at once
// (within abandonBound) and is closed before Wait returns, so that a
// bridge that ends right after it starts leaves no live-looking member on
// the board. Wait then returns ErrSetupAbandoned.
func Start(ctx context.Context, cfg Config, open func() (actions.Source, error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	go func() {
		defer close(p.done)
		pause := retryFirst
		for attempt := 1; ; attempt++ {
			src, err := open()
			if err == nil {
				if ctx.Err() != nil {
					src.Close()
					p.err = ErrSetupAbandoned
					cfg.Logger.Info("session setup abandoned: the bridge ended before it joined the board")
					return
				}
				cfg.Source = src
				var s *Session
				if s, err = NewSession(ctx, cfg); err == nil {
					p.s, p.err = p.adopt(ctx, cfg, s)
					return
				}
				if ctx.Err() != nil {
					p.err = fmt.Errorf("%w: %w", ErrSetupAbandoned, err)
					cfg.Logger.Info("session setup abandoned: the bridge ended while it joined the board", logkey.Err, err)
					src.Close()
					return
				}
				src.Close()
			}
			var temp interface{ Temporary() bool }
			if !errors.As(err, &temp) || !temp.Temporary() {
				p.err = err
				return
			}
			p.retrying.Store(&err)
			cfg.Logger.Warn("bee cannot set up its session yet; retrying", logkey.Attempt, attempt, logkey.Pause, pause, logkey.Err, err)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				p.err = fmt.Errorf("%w: %w", ErrSetupAbandoned, err)
				cfg.Logger.Info("session setup abandoned: the bridge ended while it waited to retry", logkey.Err, err)
				return
			}
			pause = min(2*pause, retryMax)
		}
	}()
	return p
}

// adopt returns s, set up, unless the bridge began ending (ctx) while it
// joined: then nobody will depart its identity, so adopt departs it and
// closes s.
func (p *Pending) adopt(ctx context.Context, cfg Config, s *Session) (*Session, error) {
	if ctx.Err() == nil {
		return s, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonBound)
	err := s.Depart(dctx)
	cancel()
	s.Close()
	if err != nil {
		cfg.Logger.Warn("session setup abandoned, and its identity's departure not recorded; it shows until its lease runs out", logkey.Identity, s.Identity(), logkey.Err, err)
	} else {
		cfg.Logger.Info("session setup abandoned: the bridge ended as it joined; its identity departed", logkey.Identity, s.Identity())
	}
	return nil, ErrSetupAbandoned
}

// ErrSetupAbandoned is what Wait returns when the context given to Start
// ended before the session was set up.
var ErrSetupAbandoned = errors.New("bee ended before its session was set up")

// abandonBound bounds the departure of a session set up after its bridge
// began ending.
const abandonBound = 200 * time.Millisecond

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

// Session returns the session if it is set up, nil if it is not (yet):
// unlike Wait, it never blocks.
func (p *Pending) Session() *Session {
	select {
	case <-p.done:
		return p.s
	default:
		return nil
	}
}

// A retryingError is Wait's answer while the setup retries: it reads as the
// error being retried, and wraps both it and the context's error.
type retryingError struct{ last, ctx error }

func (e retryingError) Error() string   { return e.last.Error() + "; bee keeps retrying" }
func (e retryingError) Unwrap() []error { return []error{e.last, e.ctx} }

// Retire waits for the session and retires its identity (Session.Retire).
func (p *Pending) Retire(ctx context.Context, req RetireRequest) (Retirement, error) {
	s, err := p.Wait(ctx)
	if err != nil {
		return Retirement{}, err
	}
	return s.Retire(ctx, req)
}

// WaitForWork waits for the session and holds the waiter there
// (Session.WaitForWork). A session that could not be set up answers
// no wake, saying why.
func (p *Pending) WaitForWork(ctx context.Context, req WaitRequest) WakeAnswer {
	s, err := p.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return WakeAnswer{Reason: ReasonGone}
		}
		return WakeAnswer{Reason: "bee cannot serve actions: " + err.Error()}
	}
	return s.WaitForWork(ctx, req)
}
