// Package position writes and reads what names a place in a board's
// history, the same way on both boards: action ids ("a-<seq>", seq the
// posting order) and cursors. Every position has one spelling: numbers are
// written as strconv writes them, and anything else is refused.
//
// Cursors come in two kinds, both prefixed by the id of the board that
// made them:
//
//   - "<board id>.s<seq>", made by List and Next: the posting order up to
//     seq has been seen.
//   - "<board id>.r<rev>" or "<board id>.r<rev>.<seq>", made by Head and
//     Changes: the changes up to that point have been seen.
//
// The empty cursor means "from the start" for both. A cursor of the other
// kind, of another board (its id differs, as for a board file moved aside
// and made again), or not made by a board at all (such as NoActions' "0")
// is refused with actions.ErrBadCursor.
package position

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// MaxSeq is past every action's seq.
const MaxSeq = int64(1<<63 - 1)

// Cursors makes and reads the cursors of one board.
type Cursors struct {
	ID    string // the board's id
	Where string // where the board is, for errors: a path, or a URL without its password
}

// Seq is the cursor after the action seq in posting order.
func (c Cursors) Seq(seq int64) actions.Cursor {
	return actions.Cursor(c.ID + ".s" + strconv.FormatInt(seq, 10))
}

// ParseSeq returns the seq of a cursor Seq made (0 for the empty cursor),
// or an error wrapping actions.ErrBadCursor.
func (c Cursors) ParseSeq(cur actions.Cursor) (int64, error) {
	if cur == "" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(string(cur), c.ID+".s")
	if !ok {
		return 0, c.bad(cur)
	}
	seq, ok := ParseCount(rest)
	if !ok {
		return 0, c.bad(cur)
	}
	return seq, nil
}

// Rev marks the change rev of the action seq; seq < 0 or MaxSeq (as
// ParseRev returns it) marks every change up to and including rev, so Rev
// makes again the cursor ParseRev read.
func (c Cursors) Rev(rev, seq int64) actions.Cursor {
	s := c.ID + ".r" + strconv.FormatInt(rev, 10)
	if seq >= 0 && seq != MaxSeq {
		s += "." + strconv.FormatInt(seq, 10)
	}
	return actions.Cursor(s)
}

// ParseRev returns the position after which changes are new: every (rev,
// seq) greater than the pair returned, in that order (seq is MaxSeq for a
// cursor of every change up to rev; both are 0 for the empty cursor). A
// cursor Rev did not make is an error wrapping actions.ErrBadCursor.
func (c Cursors) ParseRev(cur actions.Cursor) (rev, seq int64, err error) {
	if cur == "" {
		return 0, 0, nil
	}
	rest, ok := strings.CutPrefix(string(cur), c.ID+".r")
	if !ok {
		return 0, 0, c.bad(cur)
	}
	revText, seqText, hasSeq := strings.Cut(rest, ".")
	if rev, ok = ParseCount(revText); !ok {
		return 0, 0, c.bad(cur)
	}
	if !hasSeq {
		return rev, MaxSeq, nil
	}
	if seq, ok = ParseCount(seqText); !ok {
		return 0, 0, c.bad(cur)
	}
	return rev, seq, nil
}

func (c Cursors) bad(cur actions.Cursor) error {
	return fmt.Errorf("cursor %s was not made by board %s (id %s); start again with an empty cursor: %w",
		actions.Quote(string(cur)), c.Where, c.ID, actions.ErrBadCursor)
}

// ParseCount parses a non-negative decimal written the way strconv writes
// it (no sign, no leading zeros), so each position has one spelling.
func ParseCount(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// ActionID is the id of the action with posting order seq.
func ActionID(seq int64) string { return "a-" + strconv.FormatInt(seq, 10) }

// ParseActionID returns the posting order an action id names.
func ParseActionID(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, "a-")
	if !ok {
		return 0, false
	}
	seq, ok := ParseCount(rest)
	return seq, ok && seq > 0
}

// UnknownHint is actions.ErrUnknownAction for an id no board makes,
// suggesting the id meant ("7" -> "a-7").
func UnknownHint(id string) error {
	if _, ok := ParseCount(strings.TrimSpace(id)); ok {
		return fmt.Errorf("%w (ids look like a-%s)", actions.ErrUnknownAction, strings.TrimSpace(id))
	}
	return actions.ErrUnknownAction
}
