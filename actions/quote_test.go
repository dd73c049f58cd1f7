package actions

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	require.Equal(t, `"a-7"`, Quote("a-7"))
	exact := strings.Repeat("x", QuoteMax)
	require.Equal(t, strconv.Quote(exact), Quote(exact), "up to QuoteMax bytes, whole")

	long := strings.Repeat("x", 100_000)
	q := Quote(long)
	require.Less(t, len(q), 2*QuoteMax)
	require.Contains(t, q, "(99936 bytes more)")

	// Cut at a character's boundary: the quoted part is valid UTF-8.
	runes := strings.Repeat("é", QuoteMax) // two bytes each
	q = Quote(runes)
	head, err := strconv.Unquote(q[:strings.Index(q, "…")])
	require.NoError(t, err)
	require.True(t, utf8.ValidString(head))
	require.LessOrEqual(t, len(head), QuoteMax)
}

func TestNoActions_BadCursorQuotedWithinBounds(t *testing.T) {
	_, err := NoActions{}.List(t.Context(), Cursor(strings.Repeat("c", 100_000)))
	require.ErrorIs(t, err, ErrBadCursor)
	require.Less(t, len(err.Error()), 300)
}
