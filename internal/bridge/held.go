package bridge

import (
	"context"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Abandoned calls. A client can give up on a bee_wait_action without a
// cancel: Claude Code does when its idle timeout passes with no progress
// notification (CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT), tells the model the
// call failed and ends the turn, and drops the answer when it comes. A
// claim that answer hands over goes to nobody, and nothing in MCP
// acknowledges an answer. Waits on one connection cannot guard each other
// (the subagents of a session share it and run waits side by side), so
// two guards stand instead:
//
//   - Progress every DefaultProgressInterval (2 s) resets the client's idle
//     timer, so only an idle timeout under about 2 s can abandon a wait.
//   - The rule of the unfollowed claim. A claim a wait handed over is
//     followed up when the model finishes, fails, releases or cancels that
//     action through a tool. A turn of the session ends when a waiter
//     registers (bee-hook --wait-for-work runs at every Stop, and at
//     SessionStart). A claim that is not followed up once a turn has ended
//     since its wait began (the wait ran on past the turn, or the turn
//     ended without acting on it) gets RemindAfter to be followed up;
//     then the bridge hands it over again as it hands over a claim made
//     for a wake: the armed waiter (or the next one) wakes the session
//     with a line naming it (ReminderLine), the session's next
//     bee_wait_action returns it at once, and if none does within
//     HandoverWithin it goes back to the board. It does so once per action
//     per identity: a session told once, which takes the claim back with a
//     wait, holds it knowingly.
//
// So no claim stays held silently by a session that will not act on it:
// within RemindAfter of the turn's end the session is woken about it, or,
// with no waiter to wake it and no wait to take it, it is on the board
// again within RemindAfter + HandoverWithin. A waiter that registers also
// stops waits begun before it from silencing it (see wake.go), so an
// abandoned wait cannot keep the session deaf. A session without bee's
// waiter hooks never tells the bridge that a turn ended: there a claim
// nobody acts on stays with the identity until /clear or the bridge's end,
// as it always has (and progress every 2 s makes abandoning one unlikely).
//
// The price: a background subagent that works on an action for longer than
// RemindAfter after its session's turn ended, without a bee tool call
// naming it, gets its session woken once about it; the session takes the
// claim back with a wait (keeping it for the subagent) or, ignoring the
// wake, lets it go back to the board after HandoverWithin, and the
// subagent's finish is then refused.

// DefaultRemindAfter is how long a claim a wait handed over may stay
// unfollowed after a turn of the session ended, before the session is
// woken about it. Long enough for a subagent that runs on past its
// session's turn to act on what it just took; short enough that an
// abandoned claim is back within a minute or so.
const DefaultRemindAfter = 30 * time.Second

// maxReminded bounds how many action ids an identity remembers having been
// reminded of; the oldest are forgotten first.
const maxReminded = 1024

// A heldClaim is a claim a wait handed over, until the model acts on it.
type heldClaim struct {
	rec    actions.Record
	holder identity.ID
	turn   int         // wakeState.turns when the wait that handed it over began
	timer  *time.Timer // runs once a turn has ended since; nil before
}

// delivered records the claims a wait's answer hands over. mu is not held.
func (s *Session) delivered(w *waitCall, recs []actions.Record) {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	if s.wk.closed {
		return
	}
	for _, r := range recs {
		h := &heldClaim{rec: r, holder: identity.ID(r.Holder), turn: w.turn}
		s.wk.forgetHeld(r.ID)
		s.wk.held[r.ID] = h
		if s.wk.turns > w.turn {
			s.remindLater(h) // the turn ended while the wait ran
		}
	}
}

// turnEnded starts the reminder bound of every claim not yet followed up:
// a waiter has registered, so the turn that took them has ended. mu is
// held.
func (s *Session) turnEnded() {
	for _, h := range s.wk.held {
		if h.timer == nil {
			s.remindLater(h)
		}
	}
}

// remindLater starts h's reminder bound. mu is held.
func (s *Session) remindLater(h *heldClaim) {
	h.timer = time.AfterFunc(s.remindAfter, func() { s.remind(h) })
}

// followedUp records that the model acted on the action id (a finish,
// fail, release or cancel naming it, whatever its outcome): a claim of it
// is no longer at risk, and no reminder of it is due.
func (s *Session) followedUp(id string) {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	s.wk.forgetHeld(id)
	for i, h := range s.wk.handed {
		if h.reminder && h.rec.ID == id {
			h.timer.Stop()
			s.wk.handed = append(s.wk.handed[:i:i], s.wk.handed[i+1:]...)
			break
		}
	}
}

// forgetHeld stops tracking the claim of id, if any. mu is held.
func (w *wakeState) forgetHeld(id string) {
	if h := w.held[id]; h != nil {
		if h.timer != nil {
			h.timer.Stop()
		}
		delete(w.held, id)
	}
}

// dropHeld stops tracking every claim of who (every claim, for ""): its
// departure gives them back. mu is held.
func (w *wakeState) dropHeld(who identity.ID) {
	for id, h := range w.held {
		if who == "" || h.holder == who {
			w.forgetHeld(id)
		}
	}
}

// remind runs when h's reminder bound has passed: unless the model acted
// on it meanwhile, the session has been reminded of it already, or the
// board shows it no longer held, the claim is handed over again and the
// waiter wakes the session about it.
func (s *Session) remind(h *heldClaim) {
	id := h.rec.ID
	s.wk.mu.Lock()
	if s.wk.held[id] != h || s.wk.closed {
		s.wk.mu.Unlock()
		return
	}
	delete(s.wk.held, id)
	again := s.wk.remindedFor == h.holder && s.wk.reminded[id]
	s.wk.mu.Unlock()
	if again {
		s.log.Info("claim still not followed up after a reminder; left with the session", logkey.ActionID, id, logkey.Identity, h.holder)
		return
	}
	ctx, cancel := context.WithTimeout(s.life, publishBound)
	rec, err := s.source.Get(ctx, id)
	cancel()
	switch {
	case err == nil && (rec.State != actions.Claimed || rec.Holder != string(h.holder)):
		return // it ended, or went back, meanwhile
	case err != nil:
		rec = h.rec // the board cannot say; the claim most likely holds
	}
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	if s.wk.closed || s.wk.me != h.holder {
		return // retired or ended: the departure gave the claim back
	}
	s.wk.markReminded(h.holder, id)
	s.wk.handOver(rec, h.holder, true, s.handoverWithin, s.expireHandover)
	if cur := s.wk.cur; cur != nil && cur.stopNotice != nil {
		cur.stopNotice() // the armed waiter looks again, and tells it
	}
	s.log.Info("claim not followed up since the turn ended; the session is reminded of it",
		logkey.ActionID, id, logkey.Identity, h.holder, logkey.Within, s.remindAfter)
}

// markReminded remembers that who was reminded of id. mu is held.
func (w *wakeState) markReminded(who identity.ID, id string) {
	if w.remindedFor != who {
		w.remindedFor, w.remindedOrder, w.reminded = who, nil, map[string]bool{}
	}
	w.reminded[id] = true
	w.remindedOrder = append(w.remindedOrder, id)
	if len(w.remindedOrder) > maxReminded {
		delete(w.reminded, w.remindedOrder[0])
		w.remindedOrder = w.remindedOrder[1:]
	}
}
