package bridge

import (
	"encoding/json"
	"sync"

	"github.com/tractat-us/bee/internal/logkey"
)

// maxGiveBacks bounds the undelivered answers waiting for the give-back
// worker. A client drops one answer at a time (a cancelled wait), and a
// session has one wait at a time, so the queue is nearly always empty; a
// full queue means the board has been stuck for a while.
const maxGiveBacks = 64

// giveBacks is the session's give-back worker: it releases the claims of
// answers the transport could not deliver, off the transport's goroutines.
// The reading goroutine hands a dropped answer over, and a release (a board
// write, which can wait on another process's lock) never delays the next
// line. The worker starts with the first hand-over and ends at Close, once
// it has drained the queue.
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
