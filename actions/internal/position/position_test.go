package position

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

func TestCursors_RoundTrip(t *testing.T) {
	c := Cursors{ID: "abcd1234", Where: "/tmp/board.db"}
	seq, err := c.ParseSeq(c.Seq(42))
	require.NoError(t, err)
	require.Equal(t, int64(42), seq)

	rev, seq, err := c.ParseRev(c.Rev(7, 3))
	require.NoError(t, err)
	require.Equal(t, []int64{7, 3}, []int64{rev, seq})
	rev, seq, err = c.ParseRev(c.Rev(7, -1))
	require.NoError(t, err)
	require.Equal(t, []int64{7, MaxSeq}, []int64{rev, seq})
	require.Equal(t, c.Rev(7, -1), c.Rev(rev, seq), "Rev makes again what ParseRev read")

	seq, err = c.ParseSeq("")
	require.NoError(t, err)
	require.Zero(t, seq)
}

func TestCursors_Refused(t *testing.T) {
	c := Cursors{ID: "abcd1234", Where: "/tmp/board.db"}
	other := Cursors{ID: "ffff0000"}
	for _, cur := range []actions.Cursor{"0", c.Rev(1, 1), other.Seq(1), "abcd1234.s01", "abcd1234.s-1", "abcd1234.s"} {
		_, err := c.ParseSeq(cur)
		require.ErrorIs(t, err, actions.ErrBadCursor, cur)
	}
	for _, cur := range []actions.Cursor{"0", c.Seq(1), other.Rev(1, 1), "abcd1234.r1.", "abcd1234.r+1", "abcd1234.r1.2.3"} {
		_, _, err := c.ParseRev(cur)
		require.ErrorIs(t, err, actions.ErrBadCursor, cur)
	}
	_, err := c.ParseSeq("x")
	require.ErrorContains(t, err, "/tmp/board.db")
}

func TestActionID(t *testing.T) {
	require.Equal(t, "a-7", ActionID(7))
	for id, want := range map[string]int64{"a-7": 7, "a-0": 0, "a-07": 0, "7": 0, "a-": 0, "a--1": 0} {
		seq, ok := ParseActionID(id)
		require.Equal(t, want != 0, ok, id)
		require.Equal(t, want, seq, id)
	}
	require.ErrorIs(t, UnknownHint("7"), actions.ErrUnknownAction)
	require.ErrorContains(t, UnknownHint(" 7 "), "ids look like a-7")
	require.Equal(t, actions.ErrUnknownAction, UnknownHint("b-7"))
}
