// Package wakeup decides whom a change on a board wakes, for both boards'
// notifiers: a change concerns everyone, or the waiters of one agent only.
// Each board carries the key between processes its own way (the embedded
// board in a notify file's name, the PostgreSQL board in a NOTIFY payload)
// and fans it out to its local waiters with a Signal. A waiting call's loop
// (look, sleep until woken, look again) is Wait.
package wakeup

import (
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// Everyone is the key of a change that concerns every waiter.
const Everyone = ""

// People is the key of an outcome whose poster is a person, and of an
// action addressed to people ("user:<name>", "people"): no agent's waiter
// hears of it (people ask with bee wait, an Await, which hears of every
// end, and watch every change). It is no agent name, since agent names
// cannot hold '~'.
const People = "~people"

// ForRecipient is whom a claimable action addressed to to concerns:
// Everyone for an action for anyone, People for one for people, else the
// agent of its recipient (the agent's other identities wake too, and find
// nothing for them).
func ForRecipient(to string) string {
	switch {
	case to == "":
		return Everyone
	case actions.ForPeople(to):
		return People
	}
	if a := identity.ID(to).Agent(); a != "" {
		return a
	}
	return to
}

// ForPoster is whom the end of an action posted by from concerns, besides
// Await, which hears of every end: its poster's agent, or People.
func ForPoster(from string) string {
	if a := identity.ID(from).Agent(); a != "" {
		return a
	}
	return People
}

// A Signal wakes the local waiters of one kind of event: those waiting for
// one agent's events (who also wake for events that concern Everyone), and
// those waiting for every event of the kind. A waiter takes its channel
// before it looks at the board, so an event after the look is never
// missed. A Signal is not safe for concurrent use: its owner guards it.
type Signal struct {
	every  chan struct{}            // closed at every event
	agents map[string]chan struct{} // made when a waiter asks; closed at the agent's events and everyone's
}

// NewSignal returns a Signal nobody waits on yet.
func NewSignal() *Signal {
	return &Signal{every: make(chan struct{}), agents: make(map[string]chan struct{})}
}

// ForAgent returns the channel closed at the next event that concerns
// agent (its own or everyone's).
func (s *Signal) ForAgent(agent string) <-chan struct{} {
	ch, ok := s.agents[agent]
	if !ok {
		ch = make(chan struct{})
		s.agents[agent] = ch
	}
	return ch
}

// Every returns the channel closed at the next event of any key.
func (s *Signal) Every() <-chan struct{} { return s.every }

// Fire wakes the waiters an event for key concerns. An agent nobody waits
// for costs nothing.
func (s *Signal) Fire(key string) {
	close(s.every)
	s.every = make(chan struct{})
	if key == Everyone {
		for _, ch := range s.agents {
			close(ch)
		}
		clear(s.agents)
		return
	}
	if ch, ok := s.agents[key]; ok {
		close(ch)
		delete(s.agents, key)
	}
}

// Closed reports whether ch is closed now, without waiting.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
