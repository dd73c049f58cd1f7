package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tractat-us/bee/actions"
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
}

// Ready returns a Pending that already holds s.
func Ready(s *Session) *Pending {
	p := &Pending{done: make(chan struct{}), s: s}
	close(p.done)
	return p
}

// Start opens the source with open and starts a session on it, in a
// goroutine that ends when both are done. cfg.Source is ignored.
//
// ctx bounds the setup: once it ends, the setup is abandoned, and a
// session whose setup finishes after that departs at once (within
// abandonBound) and is closed before Wait returns, so that a bridge that
// ends right after it starts leaves no live-looking member on the board.
// Wait then returns ErrSetupAbandoned.
func Start(ctx context.Context, cfg Config, open func() (actions.Source, error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	go func() {
		defer close(p.done)
		src, err := open()
		if err != nil {
			p.err = err
			return
		}
		if ctx.Err() != nil {
			src.Close()
			p.err = ErrSetupAbandoned
			cfg.Logger.Info("session setup abandoned: the bridge ended before it joined the board")
			return
		}
		cfg.Source = src
		s, err := NewSession(ctx, cfg)
		if err != nil {
			p.err = err
			if ctx.Err() != nil {
				p.err = fmt.Errorf("%w: %w", ErrSetupAbandoned, err)
				cfg.Logger.Info("session setup abandoned: the bridge ended while it joined the board", logkey.Err, err)
			}
			// Last: closing can wait for another process's write to end.
			src.Close()
			return
		}
		if ctx.Err() != nil {
			// Nobody will depart this identity: the bridge began ending
			// while it joined.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonBound)
			err := s.Depart(dctx)
			cancel()
			s.Close()
			p.err = ErrSetupAbandoned
			if err != nil {
				cfg.Logger.Warn("session setup abandoned, and its identity's departure not recorded; it shows until its lease runs out", logkey.Identity, s.Identity(), logkey.Err, err)
			} else {
				cfg.Logger.Info("session setup abandoned: the bridge ended as it joined; its identity departed", logkey.Identity, s.Identity())
			}
			return
		}
		p.s = s
	}()
	return p
}

// ErrSetupAbandoned is what Wait returns when the context given to Start
// ended before the session was set up.
var ErrSetupAbandoned = errors.New("bee ended before its session was set up")

// abandonBound bounds the departure of a session set up after its bridge
// began ending.
const abandonBound = 200 * time.Millisecond

// Wait returns the session once it is set up, the error that stopped it,
// or ctx's error.
func (p *Pending) Wait(ctx context.Context) (*Session, error) {
	select {
	case <-p.done:
		return p.s, p.err
	case <-ctx.Done():
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
