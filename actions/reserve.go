package actions

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tractat-us/bee/actions/pathglob"
)

// Reservations: path patterns of one repository that an identity (or a
// person) holds, exclusive or shared, for as long as it lives. Two
// reservations in one repository conflict when some path could match both
// (pathglob.Overlap) and at least one is exclusive; a holder never
// conflicts with itself. A reservation is granted whole or refused whole.
// An identity's reservations end in the same transaction as its
// departure (a clean end, /clear, the reap of a dead process, a lease run
// out), an explicit release, or the end or release of the action they
// serve; a person's live until released.
//
// An action may carry paths (Draft.Repo and Draft.Paths): claiming it
// reserves them, exclusive, for the claimant, serving the action; while
// it is open and its paths conflict with another holder's reservation it
// is held back (Record.HeldBackBy): nobody but that holder may claim it,
// and it wakes nobody else, until the reservation ends.

// Bounds of reservations, besides pathglob's (MaxPatternLen, and
// MaxPatterns patterns per reservation or per action).
const (
	// MaxReasonLen is the longest reason a reservation may give, in
	// characters; it is one line. An action's title, the reason of the
	// reservation its claim makes, always fits.
	MaxReasonLen = MaxTitleLen
	// MaxRepoLen is the longest repository name a board keeps, in bytes
	// (a name may hold a path: "<host>:<git common directory>").
	MaxRepoLen = 4096
	// MaxPatterns is the most patterns one reservation, one release or one
	// action's paths may name.
	MaxPatterns = pathglob.MaxPatterns
)

// ReservationPrefix starts every reservation id: "r-<n>".
const ReservationPrefix = "r-"

// Errors of reservations.
var (
	// ErrReserved: paths asked for are held by another holder (a
	// *ReservedError says by whom).
	ErrReserved = errors.New("paths are reserved")
	// ErrBadPattern: a path pattern was refused (see package pathglob);
	// the error names the pattern and what to write instead.
	ErrBadPattern = pathglob.ErrBadPattern
	// ErrBadRepo: a repository name is empty, too long or not text.
	ErrBadRepo = errors.New("bad repository name")
)

// A Reservation is a live reservation as boards report it.
type Reservation struct {
	ID       string   `json:"id"`       // "r-<n>", one per reserve call
	Repo     string   `json:"repo"`     // repo.Repo.Name
	Holder   string   `json:"holder"`   // an identity, or a person "user:NAME"
	Patterns []string `json:"patterns"` // pathglob patterns still held
	// Exclusive is false for a shared reservation: other shared ones may
	// overlap it, exclusive ones may not.
	Exclusive bool      `json:"exclusive"`
	Reason    string    `json:"reason,omitempty"`
	Action    string    `json:"action,omitempty"` // the action it serves, if any
	Since     time.Time `json:"since"`
}

// A ReserveRequest is what Reserve takes.
type ReserveRequest struct {
	Repo     string   // required; at most MaxRepoLen bytes
	Patterns []string // pathglob.ParseAll rules: 1 to MaxPatterns
	Shared   bool     // the zero value is exclusive
	Reason   string   // one line of at most MaxReasonLen characters; may be empty
	// Action is optional: the id of an action the holder holds (claimed);
	// the reservation ends with it (finished, failed, cancelled or
	// released).
	Action string
}

// A HeldBack says what holds an open action back: a reservation of
// another holder, and the pattern of it that overlaps the action's paths.
type HeldBack struct {
	Reservation string `json:"reservation"` // r-<n>
	Holder      string `json:"holder"`
	Pattern     string `json:"pattern"` // the held pattern that overlaps
}

// A ReservedError refuses a reservation, or an action's claim, because
// other holders hold overlapping paths. It wraps ErrReserved.
type ReservedError struct {
	Repo string
	// Conflicts are the reservations in the way, oldest first, each with
	// only those of its patterns that overlap what was asked for.
	Conflicts []Reservation
	// At is the board's time of the refusal, from which ages are told.
	At time.Time
}

// Error names each conflicting holder, its patterns, reason, age and
// action, and says what to do.
func (e *ReservedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "paths are reserved in %s: ", e.Repo)
	for i, r := range e.Conflicts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(DescribeReservation(r, e.At))
	}
	b.WriteString(". Nothing was reserved: reserve other paths, wait until they are released, or post the holder an action")
	return b.String()
}

// Unwrap returns ErrReserved.
func (e *ReservedError) Unwrap() error { return ErrReserved }

// DescribeReservation says in one line who holds r, which patterns, how
// (exclusive or shared), how long ago (at now), for which action and why:
// `agent:x#1a2b3c4d holds src/auth/** (r-3, exclusive, reserved 3m0s ago,
// for action a-7: "rework the login")`.
func DescribeReservation(r Reservation, now time.Time) string {
	kind := "shared"
	if r.Exclusive {
		kind = "exclusive"
	}
	age := max(now.Sub(r.Since).Truncate(time.Second), 0)
	s := fmt.Sprintf("%s holds %s (%s, %s, reserved %v ago", r.Holder, strings.Join(r.Patterns, ", "), r.ID, kind, age)
	if r.Action != "" {
		s += ", for action " + r.Action
	}
	if r.Reason != "" {
		s += ": " + Quote(r.Reason)
	}
	return s + ")"
}

// CheckRepo refuses a repository name that is empty, longer than
// MaxRepoLen bytes or not text (ErrBadRepo).
func CheckRepo(repo string) error {
	switch {
	case repo == "":
		return fmt.Errorf("no repository named; paths are relative to a repository's root: %w", ErrBadRepo)
	case len(repo) > MaxRepoLen:
		return fmt.Errorf("repository name is %d bytes, more than %d: %w", len(repo), MaxRepoLen, ErrBadRepo)
	case !utf8.ValidString(repo) || strings.IndexFunc(repo, unicode.IsControl) >= 0:
		return fmt.Errorf("repository name %s is not plain text: %w", Quote(repo), ErrBadRepo)
	}
	return nil
}

// CheckReason refuses a reservation's reason that is longer than
// MaxReasonLen characters (ErrTooLong), or not one line of text
// (ErrBadText). It returns the reason trimmed.
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if err := CheckText("reason", reason, 4*MaxReasonLen); err != nil {
		return "", err
	}
	if n := utf8.RuneCountInString(reason); n > MaxReasonLen {
		return "", fmt.Errorf("reason is %d characters, more than %d: %w", n, MaxReasonLen, ErrTooLong)
	}
	if i := strings.IndexFunc(reason, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(reason[i:])
		return "", fmt.Errorf("reason holds the control character %U; a reason is one line of plain text: %w", r, ErrBadText)
	}
	return reason, nil
}

// CheckPaths checks the paths an action carries: none (and no repo
// needed), or a repository CheckRepo accepts and patterns
// pathglob.ParseAll accepts. It returns the patterns normalised, each
// once; nil for none.
func CheckPaths(repo string, paths []string) ([]pathglob.Pattern, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if err := CheckRepo(repo); err != nil {
		return nil, fmt.Errorf("paths: %w", err)
	}
	ps, err := pathglob.ParseAll(paths)
	if err != nil {
		return nil, fmt.Errorf("paths: %w", err)
	}
	return ps, nil
}
