package identity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMint(t *testing.T) {
	a, err := Mint("cleartest")
	require.NoError(t, err)
	b, err := Mint("cleartest")
	require.NoError(t, err)
	require.Regexp(t, `^agent:cleartest#[0-9a-f]{8}$`, string(a))
	require.NotEqual(t, a, b, "two mints must differ")
	require.Equal(t, "cleartest", a.Agent())
	_, err = Parse(string(a))
	require.NoError(t, err)
}

func TestMint_BadName(t *testing.T) {
	for _, name := range []string{"", "has space", "a#b", "-lead", string(make([]byte, MaxNameLen+1)), ReservedName} {
		_, err := Mint(name)
		require.ErrorIs(t, err, ErrBadName, "name %q", name)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"agent:x#0491068b", true},
		{"agent:x#0491068B", false},
		{"agent:x#0491068", false},
		{"agent:#0491068b", false},
		{"x#0491068b", false},
		{"agent:x", false},
		{"agent:people#0491068b", false}, // "people" addresses people on the board
		{"agent:People#0491068b", true},
	} {
		_, err := Parse(tc.in)
		if tc.ok {
			require.NoError(t, err, tc.in)
			require.True(t, IsID(tc.in))
		} else {
			require.ErrorIs(t, err, ErrBadID, tc.in)
			require.False(t, IsID(tc.in))
			if ID(tc.in).Agent() != ReservedName {
				require.Empty(t, ID(tc.in).Agent())
			}
		}
	}
}

func TestNameFromDir(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"/home/me/bee", "bee"},
		{"/home/me/my project", "my-project"},
		{"/home/me/.hidden", "hidden"},
		{"/", FallbackName},
		{"/tmp/日本", FallbackName},
		{"/tmp/a日本", "a--"},
		{"/home/me/people", FallbackName}, // reserved
		{"/home/me/people2", "people2"},
	} {
		require.Equal(t, tc.want, NameFromDir(tc.dir), tc.dir)
	}
}
