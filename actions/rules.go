package actions

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tractat-us/bee/identity"
)

// What every board accepts, and the errors it returns when something is
// not acceptable. Boards check with these functions, so that the embedded
// board and the PostgreSQL board refuse exactly the same things with the
// same sentinels.

// Bounds on what an action may carry.
const (
	MaxTitleLen  = 200      // characters, after trimming
	MaxBodyLen   = 64 << 10 // bytes
	MaxResultLen = 64 << 10 // bytes
)

// UserPrefix starts the poster name of a person, as in "user:alice".
const UserPrefix = "user:"

// Errors a board returns besides the Source sentinels, wrapped with the
// detail that names the field.
var (
	// ErrClosed: the board was closed.
	ErrClosed = errors.New("board closed")
	// ErrBadRecipient: a to is neither "", an agent name nor an identity.
	ErrBadRecipient = errors.New("bad recipient")
	// ErrBadPoster: a poster is neither an identity nor a user.
	ErrBadPoster = errors.New("bad poster")
	// ErrTooLong: a title, body or result is over its bound.
	ErrTooLong = errors.New("too long")
	// ErrBadText: a title, body or result is not valid UTF-8 or holds a
	// NUL, or a title holds a line break or another control character.
	ErrBadText = errors.New("bad text")
)

// User returns the Poster for a person called name ("user:<name>"); the
// name follows the rules of an agent name (identity.CheckName).
func User(name string) (Poster, error) {
	if err := identity.CheckName(name); err != nil {
		return "", fmt.Errorf("user name: %w", err)
	}
	return Poster(UserPrefix + name), nil
}

// QuoteMax bounds what Quote keeps of a caller's argument, in bytes.
const QuoteMax = 64

// Quote returns s quoted as %q quotes it, cut after QuoteMax bytes (at a
// character's boundary) with the count of the bytes left out: what an error
// says of a cursor, an id or another argument a caller gave, so that a huge
// one is never echoed whole.
func Quote(s string) string {
	if len(s) <= QuoteMax {
		return strconv.Quote(s)
	}
	cut := QuoteMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", strconv.Quote(s[:cut]), len(s)-cut)
}

// IsUser reports whether who is a person ("user:<name>").
func IsUser(who string) bool { return strings.HasPrefix(who, UserPrefix) }

// CheckPoster accepts an identity or a person ("user:<name>"), and returns
// ErrBadPoster otherwise.
func CheckPoster(who identity.ID) error {
	if Poster(who).Kind() != NotAPoster {
		return nil
	}
	return fmt.Errorf("poster %s is neither an identity (agent:<name>#<8 hex>) nor a person (%s<name>): %w", Quote(string(who)), UserPrefix, ErrBadPoster)
}

// CheckRecipient accepts "", an agent name, an identity, a person
// ("user:<name>") or People, and returns ErrBadRecipient otherwise.
func CheckRecipient(to string) error {
	if to == "" || identity.IsID(to) || to == People {
		return nil
	}
	if strings.HasPrefix(to, UserPrefix) {
		return checkPersonRecipient(to)
	}
	if strings.HasPrefix(to, identity.Prefix) {
		_, err := identity.Parse(to)
		return fmt.Errorf("to %s: %w: %w", Quote(to), ErrBadRecipient, err)
	}
	if err := identity.CheckName(to); err != nil {
		return fmt.Errorf("to %s is neither empty (anyone), an agent name, an identity (agent:<name>#<8 hex>), a person (%s<name>) nor %s: %w: %w",
			Quote(to), UserPrefix, People, ErrBadRecipient, err)
	}
	return nil
}

// CheckText refuses s, the value of field, when it is longer than limit
// bytes (ErrTooLong), not valid UTF-8 or holds a NUL (ErrBadText: no
// board can keep a NUL in text; PostgreSQL refuses it).
func CheckText(field, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%s is %d bytes, more than %d: %w", field, len(s), limit, ErrTooLong)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8: %w", field, ErrBadText)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s holds a NUL character: %w", field, ErrBadText)
	}
	return nil
}

// CheckPost checks what Post takes and returns the title trimmed: a
// non-empty (ErrEmptyTitle), one-line title free of control characters
// (ErrBadText) of at most MaxTitleLen characters (ErrTooLong), a body
// CheckText accepts of at most MaxBodyLen bytes, a poster CheckPoster
// accepts and a recipient CheckRecipient accepts.
func CheckPost(who identity.ID, to, title, body string) (string, error) {
	title = strings.TrimSpace(title)
	switch {
	case title == "":
		return "", ErrEmptyTitle
	case utf8.RuneCountInString(title) > MaxTitleLen:
		return "", fmt.Errorf("title is %d characters, more than %d (put the detail in the body): %w",
			utf8.RuneCountInString(title), MaxTitleLen, ErrTooLong)
	case strings.ContainsAny(title, "\r\n"):
		return "", fmt.Errorf("title must be one line (put the rest in the body): %w", ErrBadText)
	}
	if i := strings.IndexFunc(title, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(title[i:])
		return "", fmt.Errorf("title holds the control character %U; a title is plain text: %w", r, ErrBadText)
	}
	if err := CheckText("title", title, 4*MaxTitleLen); err != nil {
		return "", err
	}
	if err := CheckText("body", body, MaxBodyLen); err != nil {
		return "", err
	}
	if err := CheckPoster(who); err != nil {
		return "", err
	}
	if err := CheckRecipient(to); err != nil {
		return "", err
	}
	return title, nil
}

// MayManage reports whether who may cancel or re-address an action posted
// by from: a person may manage any action, an agent those posted by any
// identity of the same agent (its earlier identities, before a /clear,
// included).
func MayManage(who identity.ID, from string) bool {
	if IsUser(string(who)) {
		return true
	}
	return identity.IsID(from) && identity.ID(from).Agent() == who.Agent()
}

// NotLiveErr refuses to as a recipient that is an identity but not live,
// saying why (found: it has a member row; departed: it departed) and what
// to do instead (alive: the live identities of its agent, oldest first); it
// wraps ErrNotLive.
func NotLiveErr(to string, found, departed bool, alive []string) error {
	agent := identity.ID(to).Agent()
	why := "it never joined this board"
	switch {
	case found && departed:
		why = "it has departed (its session ended, was cleared or reconnected)"
	case found:
		why = "its bridge process is gone"
	}
	hint := fmt.Sprintf("agent %q has no live identity; post to the agent name %q and its next session takes it", agent, agent)
	if len(alive) > 0 {
		hint = fmt.Sprintf("live identities of agent %q: %s; or post to the agent name %q so whichever is free takes it",
			agent, strings.Join(alive, ", "), agent)
	}
	return fmt.Errorf("to %s: %s; %s: %w", to, why, hint, ErrNotLive)
}

// EndedErr says, for op on an action r that has ended, how it ended; it
// wraps ErrEnded.
func EndedErr(op string, r Record) error {
	switch r.State {
	case Failed:
		return fmt.Errorf("%s: action %s failed (%s: %s): %w", op, r.ID, r.EndedBy, r.Reason, ErrEnded)
	case Cancelled:
		why := ""
		if r.Reason != "" {
			why = ": " + r.Reason
		}
		return fmt.Errorf("%s: action %s was cancelled by %s%s; stop working on it: %w", op, r.ID, r.EndedBy, why, ErrEnded)
	default:
		return fmt.Errorf("%s: action %s was finished by %s: %w", op, r.ID, r.EndedBy, ErrEnded)
	}
}
