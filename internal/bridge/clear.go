package bridge

import (
	"context"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// What /clear hands back. A retire departs the old identity, which gives
// its claims back to the board; the session's waiter, still armed, carries
// on under the new identity and would claim them straight back (8 ms later,
// measured) and wake the cleared conversation with the work it was just
// cleared of, while another idle session of the agent never heard of it.
// So the new identity is not woken for what the old one held, as if it had
// been woken for it once already, unless it is the only live identity of
// its agent: then nobody else of the agent could take it. Its own
// bee_wait_action may still take it.

// A memberLister is a source that lists its live identities and what each
// holds (actions.Board does).
type memberLister interface {
	Members(ctx context.Context) ([]actions.MemberInfo, error)
}

// droppedOnRetire returns the actions that old holds and gives back when it
// departs, for the new identity not to be woken for, or nil when no other
// live identity of the agent could take them. ctx bounds the look at the
// board.
func (s *Session) droppedOnRetire(ctx context.Context, old identity.ID) []string {
	held := s.heldBy(old)
	lister, ok := s.source.(memberLister)
	if !ok {
		return nil // no way to tell whether another identity of the agent is live
	}
	ms, err := lister.Members(ctx)
	if err != nil {
		s.log.Warn("cannot list the live identities at a retire; the new identity may be woken for what the old one held", logkey.Err, err)
		return nil
	}
	others := false
	for _, m := range ms {
		switch {
		case m.ID == old:
			held = append(held, m.Holding...)
		case m.Agent == s.agent:
			others = true
		}
	}
	if !others {
		return nil
	}
	return held
}

// heldBy returns what the session knows who holds: claims its waits handed
// over and claims made for a wake.
func (s *Session) heldBy(who identity.ID) []string {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	var ids []string
	for id, h := range s.wk.held {
		if h.holder == who {
			ids = append(ids, id)
		}
	}
	for _, h := range s.wk.handed {
		if h.holder == who {
			ids = append(ids, h.rec.ID)
		}
	}
	return ids
}

// switchTo makes next the identity the waiter and the reminders serve, in
// place of old: old's unfollowed claims go back with its departure, and
// next is not woken for skip. It takes mu; Session.mu is held, so that no
// waiter looks under next before skip is in place.
func (w *wakeState) switchTo(next, old identity.ID, skip []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.me = next
	w.dropHeld(old)
	for _, id := range skip {
		w.markWoken(next, id)
	}
}
