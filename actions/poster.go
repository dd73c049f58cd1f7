package actions

import (
	"strings"

	"github.com/tractat-us/bee/identity"
)

// A Poster is who posts, cancels or re-addresses an action: an agent's
// identity ("agent:<name>#<8 hex>") or a person ("user:<name>"). Its text is
// what Record.From and Record.EndedBy hold, so it encodes in JSON as that
// text; Kind says which of the two it is. An identity.ID names an agent
// only: make a Poster from one with Agent, and one for a person with User.
type Poster string

// A PosterKind says whether a Poster is an agent or a person.
type PosterKind int

// The kinds of Poster.
const (
	// NotAPoster: neither an identity nor a person; boards refuse it with
	// ErrBadPoster (see CheckPoster).
	NotAPoster PosterKind = iota
	// AgentPoster: an agent's identity.
	AgentPoster
	// PersonPoster: a person, "user:<name>".
	PersonPoster
)

// Agent returns the Poster for an agent's identity.
func Agent(id identity.ID) Poster { return Poster(id) }

// Kind says whether p is an agent's identity, a person, or neither.
func (p Poster) Kind() PosterKind {
	if identity.IsID(string(p)) {
		return AgentPoster
	}
	if name, ok := strings.CutPrefix(string(p), UserPrefix); ok && identity.CheckName(name) == nil {
		return PersonPoster
	}
	return NotAPoster
}

// Identity returns the agent's identity p names, and false when p is not
// an agent's.
func (p Poster) Identity() (identity.ID, bool) {
	if p.Kind() != AgentPoster {
		return "", false
	}
	return identity.ID(p), true
}

// String returns p's text, as Record.From holds it.
func (p Poster) String() string { return string(p) }

// A Draft is an action as it is posted: whom it is for, its title and its
// body. To is "" (anyone), an agent name or one identity.
type Draft struct {
	To    string
	Title string
	// Repo and Paths are the repository and the path patterns the action
	// will change: a Draft with Paths needs a Repo, and Post refuses what
	// CheckPaths refuses (ErrBadRepo, ErrBadPattern naming each pattern).
	Repo  string
	Paths []string
	Body  string
}
