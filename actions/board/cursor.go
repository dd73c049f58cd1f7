package board

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// Cursors name a position in one board file. Two kinds exist:
//
//   - "<board id>.s<seq>", made by List and Next: the posting order up to
//     seq has been seen.
//   - "<board id>.r<rev>" or "<board id>.r<rev>.<seq>", made by Head and
//     Wait: the changes up to that point have been seen.
//
// The empty cursor means "from the start" for both. A cursor of the other
// kind, from another board file (its id differs, as after the file was
// moved aside and made again), or not made by a board at all (such as
// NoActions' "0") is refused with actions.ErrBadCursor.

func (b *Board) seqCursor(seq int64) actions.Cursor {
	return actions.Cursor(b.id + ".s" + strconv.FormatInt(seq, 10))
}

func (b *Board) parseSeqCursor(c actions.Cursor) (int64, error) {
	if c == "" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(string(c), b.id+".s")
	if !ok {
		return 0, b.badCursor(c)
	}
	seq, ok := parseCount(rest)
	if !ok {
		return 0, b.badCursor(c)
	}
	return seq, nil
}

// revCursor marks the change rev of the action seq; seq < 0 marks every
// change up to and including rev.
func (b *Board) revCursor(rev, seq int64) actions.Cursor {
	s := b.id + ".r" + strconv.FormatInt(rev, 10)
	if seq >= 0 {
		s += "." + strconv.FormatInt(seq, 10)
	}
	return actions.Cursor(s)
}

// parseRevCursor returns the position after which changes are new: every
// (rev, seq) greater than the pair returned, in that order.
func (b *Board) parseRevCursor(c actions.Cursor) (rev, seq int64, err error) {
	if c == "" {
		return 0, 0, nil
	}
	rest, ok := strings.CutPrefix(string(c), b.id+".r")
	if !ok {
		return 0, 0, b.badCursor(c)
	}
	revText, seqText, hasSeq := strings.Cut(rest, ".")
	if rev, ok = parseCount(revText); !ok {
		return 0, 0, b.badCursor(c)
	}
	if !hasSeq {
		return rev, maxSeq, nil
	}
	if seq, ok = parseCount(seqText); !ok {
		return 0, 0, b.badCursor(c)
	}
	return rev, seq, nil
}

// maxSeq is past every action's seq.
const maxSeq = int64(1<<63 - 1)

// parseCount parses a non-negative decimal written the way strconv writes
// it (no sign, no leading zeros), so each position has one spelling.
func parseCount(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

func (b *Board) badCursor(c actions.Cursor) error {
	return fmt.Errorf("cursor %q was not made by board %s (id %s); start again with an empty cursor: %w",
		string(c), b.path, b.id, actions.ErrBadCursor)
}

// actionID is the id of the action with posting order seq.
func actionID(seq int64) string { return "a-" + strconv.FormatInt(seq, 10) }

// parseActionID returns the posting order an action id names.
func parseActionID(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, "a-")
	if !ok {
		return 0, false
	}
	seq, ok := parseCount(rest)
	return seq, ok && seq > 0
}
