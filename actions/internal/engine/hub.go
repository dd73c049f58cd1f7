package engine

import (
	"sync"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/wakeup"
)

// A Kind says what a commit changed, and so whom it wakes.
type Kind int

// The kinds of Event.
const (
	// Changed: an action changed in a way only Changes cares about (a
	// claim).
	Changed Kind = iota
	// Claimable: an action may have become claimable (posted, released,
	// reclaimed, re-addressed).
	Claimable
	// Ended: an action ended; its poster's waiters and Await care.
	Ended
)

// An Event is a change as the waiters hear of it: its kind, and whom it
// concerns (a key of package wakeup: Everyone, an agent, People).
type Event struct {
	Kind Kind
	Key  string
}

// ClaimableFor is the event of rec becoming claimable: it concerns those
// who may take it.
func ClaimableFor(rec actions.Record) Event {
	return Event{Claimable, wakeup.ForRecipient(rec.To)}
}

// EndedFor is the event of rec ending: it concerns its poster.
func EndedFor(rec actions.Record) Event { return Event{Ended, wakeup.ForPoster(rec.From)} }

// A Hub fans events out to a board's local waiters by closing their
// channels: those waiting for claimable work of an agent, for the ends of
// an agent's actions, for every end, and for every change. A waiter takes
// its channel before it looks at the board, so that an event after the
// look is never missed. Events come from this process's commits (Fire,
// after each) and from the store's transport, which hears other
// processes' (Fire, FireAll).
type Hub struct {
	hear         func(Event)
	endsOnChange bool

	mu     sync.Mutex     // guards wake, ended and change
	wake   *wakeup.Signal // an action may have become claimable
	ended  *wakeup.Signal // an action has ended
	change chan struct{}  // closed on any event
}

// NewHub returns a Hub. hear, when set, is called before a waiter takes its
// channel for an event, so that the transport carries such events from
// other processes from then on (a LISTEN, a watch); Changed asks for every
// change, and an Ended event for wakeup.Everyone for every end.
// endsOnChange says that the transport carries every end (of any agent's
// actions) to other processes only as a change, so that a waiter for every
// end wakes at every change.
func NewHub(hear func(Event), endsOnChange bool) *Hub {
	if hear == nil {
		hear = func(Event) {}
	}
	return &Hub{hear: hear, endsOnChange: endsOnChange,
		wake: wakeup.NewSignal(), ended: wakeup.NewSignal(), change: make(chan struct{})}
}

// Fire wakes the waiters e concerns: those waiting for any change always,
// those waiting for claimable work or for ends when e is that and concerns
// them.
func (h *Hub) Fire(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.change)
	h.change = make(chan struct{})
	switch e.Kind {
	case Claimable:
		h.wake.Fire(e.Key)
	case Ended:
		h.ended.Fire(e.Key)
	}
}

// FireAll wakes every waiter: something may have been missed.
func (h *Hub) FireAll() {
	h.Fire(Event{Claimable, wakeup.Everyone})
	h.Fire(Event{Ended, wakeup.Everyone})
}

// Claimable returns the channel closed at the next event that may make an
// action claimable by agent.
func (h *Hub) Claimable(agent string) <-chan struct{} {
	h.hear(Event{Claimable, agent})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wake.ForAgent(agent)
}

// Ended returns the channel closed when an action posted by one of agent's
// identities next ends.
func (h *Hub) Ended(agent string) <-chan struct{} {
	h.hear(Event{Ended, agent})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended.ForAgent(agent)
}

// EveryEnd returns the channel closed at the next end of any action (or,
// see NewHub, at the next change).
func (h *Hub) EveryEnd() <-chan struct{} {
	if h.endsOnChange {
		return h.Changes()
	}
	h.hear(Event{Ended, wakeup.Everyone})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended.Every()
}

// Changes returns the channel closed at the next change of any kind.
func (h *Hub) Changes() <-chan struct{} {
	h.hear(Event{Changed, wakeup.Everyone})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.change
}
