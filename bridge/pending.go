package bridge

import (
	"context"
	"fmt"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/clearctl"
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
func Start(ctx context.Context, cfg Config, open func() (actions.Source, error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		src, err := open()
		if err != nil {
			p.err = err
			return
		}
		cfg.Source = src
		if p.s, err = NewSession(ctx, cfg); err != nil {
			src.Close()
			p.err = err
		}
	}()
	return p
}

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

// Retire waits for the session and retires its identity; it implements
// clearctl.Retirer.
func (p *Pending) Retire(ctx context.Context, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
	s, err := p.Wait(ctx)
	if err != nil {
		return clearctl.RetireResponse{}, err
	}
	return s.Retire(ctx, req)
}

// WaitForWork waits for the session and holds the waiter there; it
// implements clearctl.Waker. A session that could not be set up answers
// no wake, saying why.
func (p *Pending) WaitForWork(ctx context.Context, req clearctl.WaitRequest) clearctl.WaitResponse {
	s, err := p.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return clearctl.WaitResponse{Reason: ReasonGone}
		}
		return clearctl.WaitResponse{Reason: "bee cannot serve actions: " + err.Error()}
	}
	return s.WaitForWork(ctx, req)
}
