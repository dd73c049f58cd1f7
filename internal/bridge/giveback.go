package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// maxGiveBacks bounds the undelivered answers waiting for the give-back
// worker. A client drops one answer at a time (a cancelled wait), so the
// queue is nearly always empty; a full queue means the board has been
// stuck for a while.
const maxGiveBacks = 64

// giveBacks is the session's give-back worker: it releases the claims of
// answers the transport could not deliver, off the transport's goroutines.
// The reading goroutine hands a dropped answer over, and a release (a board
// write, which can wait on another process's lock) never delays the next
// line. The worker starts with the first hand-over and ends at Close, once
// it has drained the queue (Close has cut the releases short by then: the
// departure before it gave every claim back).
type giveBacks struct {
	mu     sync.Mutex // guards the fields below
	q      chan []claimRef
	done   chan struct{} // closed when the worker has ended; nil before it starts
	closed bool
}

// GiveBackUndelivered hands the claims of a wait result that was never
// delivered (its call was cancelled as it claimed, or its answer could not
// be written) to the session's give-back worker, which releases them.
// result is the JSON-RPC result as the transport withheld it. Only the
// claims the result marks as handed over go back: a list that shows claimed
// actions hands nothing over, so dropping one releases nothing.
//
// GiveBackUndelivered never blocks: it is called on the transport's reading
// goroutine and inside Write. When the worker's queue is full, or the
// session is closed, the claims stay with the identity (its departure gives
// them back) and a warning says so.
func (s *Session) GiveBackUndelivered(result json.RawMessage) {
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	var claims []claimRef
	if json.Unmarshal(r.Meta[claimsMetaKey], &claims) != nil || len(claims) == 0 {
		return
	}
	g := &s.gb
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		s.log.Warn("claim not given back: the session is closed", logkey.ActionID, claims[0].ID)
		return
	}
	if g.done == nil {
		g.q = make(chan []claimRef, maxGiveBacks)
		g.done = make(chan struct{})
		go s.giveBackWorker(g.q, g.done)
	}
	select {
	case g.q <- claims:
	default:
		s.log.Warn("claim not given back: too many waiting; it goes back when this identity departs", logkey.ActionID, claims[0].ID)
	}
}

// giveBackWorker releases queued claims until q is closed and drained.
func (s *Session) giveBackWorker(q <-chan []claimRef, done chan<- struct{}) {
	defer close(done)
	for claims := range q {
		s.giveBackClaims(claims)
	}
}

// closeGiveBacks stops taking hand-overs and waits for the worker to give
// back what it holds. Close calls it.
func (s *Session) closeGiveBacks() {
	g := &s.gb
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	done := g.done
	if done != nil {
		close(g.q)
	}
	g.mu.Unlock()
	if done != nil {
		<-done
	}
}

// giveBack releases claimed records whose answer will never be read.
func (s *Session) giveBack(recs []actions.Record) {
	var claims []claimRef
	for _, r := range recs {
		if r.State == actions.Claimed && r.Holder != "" {
			claims = append(claims, claimRef{ID: r.ID, Holder: r.Holder})
		}
	}
	s.giveBackClaims(claims)
}

// giveBackClaims releases claims whose answer will never be read, each
// within giveBackBound, on the session's lifetime (the call's own context
// has ended). Nobody acts on them, and nobody needs reminding of them.
func (s *Session) giveBackClaims(claims []claimRef) {
	for _, r := range claims {
		s.wk.mu.Lock()
		s.wk.forgetHeld(r.ID)
		s.wk.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.life, giveBackBound)
		_, err := s.source.Release(ctx, identity.ID(r.Holder), r.ID)
		cancel()
		switch {
		case errors.Is(err, actions.ErrNotHeld):
			// A retire's departure put it back already.
			s.log.Debug("claim already back on the board", logkey.ActionID, r.ID)
		case err != nil && s.life.Err() != nil:
			// Closed: the departure before it gave the claim back.
		case err != nil:
			s.log.Warn("claim not given back", logkey.ActionID, r.ID, logkey.Err, err)
		default:
			s.log.Info("claim given back, its answer was not delivered", logkey.ActionID, r.ID, logkey.Identity, r.Holder)
		}
	}
}

// giveBackBound bounds one give-back's release: a stuck board holds the
// worker (and Close) no longer.
const giveBackBound = 2 * time.Second
