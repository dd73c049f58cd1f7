package actions

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/identity"
)

// People in the loop: an agent asks a person by posting an action to
// "user:<name>" (one person) or to People (any person). No agent's claim
// matches such an action, so it wakes no agent and stays open until a
// person answers it (Source.Answer: done, the answer its result), declines
// it (Source.Decline: failed, with the reason), or it is cancelled; its
// poster then hears of it as of any other outcome.

// People is the recipient that stands for any person: an action addressed
// to it waits for whichever person answers first. It is no agent's name
// (identity.ReservedName).
const People = identity.ReservedName

// Errors of Answer and Decline, wrapped with the detail that names the
// action.
var (
	// ErrNotForPerson: the action is not addressed to the person who
	// answers or declines it (it is for another person, or for agents).
	ErrNotForPerson = errors.New("action is not for this person")
	// ErrEmptyAnswer: an answer needs text.
	ErrEmptyAnswer = errors.New("answer is empty")
)

// ForPeople reports whether to addresses people: one person
// ("user:<name>") or any person (People).
func ForPeople(to string) bool {
	return to == People || Poster(to).Kind() == PersonPoster
}

// AskedOf reports whether r is a question waiting for the person p: open,
// and addressed to p or to People.
func AskedOf(r Record, p Poster) bool {
	return r.State == Open && p.Kind() == PersonPoster && (r.To == string(p) || r.To == People)
}

// checkPersonRecipient accepts a to that starts with UserPrefix when the
// name after it is a person's name, and says what is wrong otherwise.
func checkPersonRecipient(to string) error {
	name := strings.TrimPrefix(to, UserPrefix)
	if err := identity.CheckName(name); err != nil {
		return fmt.Errorf("to %s is not a person (%s<name>): %w: %w", Quote(to), UserPrefix, ErrBadRecipient, err)
	}
	return nil
}

// CheckReply checks who answers or declines r: a person (ErrBadPoster
// otherwise) to whom r is addressed, by name or as one of People
// (ErrNotForPerson otherwise, naming whom it is for). op names the call
// ("answer", "decline") in the error.
func CheckReply(op string, by Poster, r Record) error {
	switch {
	case by.Kind() != PersonPoster:
		return fmt.Errorf("%s: only a person (%s<name>) may %s action %s, not %s: %w", op, UserPrefix, op, r.ID, Quote(string(by)), ErrBadPoster)
	case r.To == People || r.To == string(by):
		return nil
	case ForPeople(r.To):
		return fmt.Errorf("%s: action %s is for %s, not %s; only that person (or the asker, by cancelling it) can end it: %w",
			op, r.ID, r.To, by, ErrNotForPerson)
	}
	whom := "anyone"
	if r.To != "" {
		whom = r.To
	}
	return fmt.Errorf("%s: action %s is for %s, not for people: an agent takes it and finishes it (a person may cancel it): %w",
		op, r.ID, whom, ErrNotForPerson)
}
