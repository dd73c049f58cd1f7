package textcut

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"fits", "abc", 3, "abc"},
		{"ascii cut", "abcdef", 3, "abc…"},
		{"never splits a rune", "aé", 2, "a…"}, // é is 2 bytes
		{"four-byte rune", "🐝🐝", 5, "🐝…"},      // 🐝 is 4 bytes
		{"nothing fits", "éé", 1, "…"},
		{"negative", "abc", -1, "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Bytes(tc.in, tc.n)
			require.Equal(t, tc.want, got)
			require.True(t, utf8.ValidString(got))
		})
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abcdef", Within("abcdef", 6))
	got := Within("abcdefgh", 6)
	require.Equal(t, "abc…", got)
	require.LessOrEqual(t, len(got), 6)
	require.Equal(t, "a…", Within("aéééé", 5))
}

func TestRunes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "日本語", Runes("日本語", 3))
	require.Equal(t, "日本…", Runes("日本語です", 2))
	require.Equal(t, "…", Runes("ab", 0))
	require.Equal(t, "日本語", RunesWithin("日本語", 3))
	require.Equal(t, "日…", RunesWithin("日本語", 2))
}
