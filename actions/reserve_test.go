package actions

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReservedError_NamesEachHolder(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	err := error(&ReservedError{Repo: "github.com/o/r", At: now, Conflicts: []Reservation{
		{ID: "r-3", Holder: "agent:a#1a2b3c4d", Patterns: []string{"src/auth/**"}, Exclusive: true,
			Reason: "rework the login", Action: "a-7", Since: now.Add(-3 * time.Minute)},
		{ID: "r-9", Holder: "user:alice", Patterns: []string{"docs", "README.md"}, Since: now.Add(-time.Second)},
	}})
	require.ErrorIs(t, err, ErrReserved)
	msg := err.Error()
	for _, want := range []string{"github.com/o/r", "agent:a#1a2b3c4d holds src/auth/** (r-3, exclusive, reserved 3m0s ago, for action a-7: \"rework the login\")",
		"user:alice holds docs, README.md (r-9, shared, reserved 1s ago)", "Nothing was reserved"} {
		require.Contains(t, msg, want)
	}
}

func TestCheckReason(t *testing.T) {
	r, err := CheckReason("  fix the login \t")
	require.NoError(t, err)
	require.Equal(t, "fix the login", r)
	r, err = CheckReason("")
	require.NoError(t, err)
	require.Empty(t, r)
	_, err = CheckReason("two\nlines")
	require.ErrorIs(t, err, ErrBadText)
	_, err = CheckReason(strings.Repeat("é", MaxReasonLen+1))
	require.ErrorIs(t, err, ErrTooLong)
	_, err = CheckReason(strings.Repeat("é", MaxReasonLen))
	require.NoError(t, err, "an action's longest title fits")
	_, err = CheckReason("bad \xff")
	require.ErrorIs(t, err, ErrBadText)
}

func TestCheckRepo(t *testing.T) {
	require.NoError(t, CheckRepo("github.com/o/r"))
	require.ErrorIs(t, CheckRepo(""), ErrBadRepo)
	require.ErrorIs(t, CheckRepo(strings.Repeat("x", MaxRepoLen+1)), ErrBadRepo)
	require.ErrorIs(t, CheckRepo("a\nb"), ErrBadRepo)
}

func TestCheckPaths(t *testing.T) {
	ps, err := CheckPaths("", nil)
	require.NoError(t, err)
	require.Nil(t, ps)
	_, err = CheckPaths("", []string{"src/**"})
	require.ErrorIs(t, err, ErrBadRepo)
	ps, err = CheckPaths("r", []string{"./src/", "src", "docs/*.md"})
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, "src", ps[0].String())
	_, err = CheckPaths("r", []string{"../x", "/abs"})
	require.ErrorIs(t, err, ErrBadPattern)
	require.ErrorContains(t, err, `"../x"`)
	require.ErrorContains(t, err, `"/abs"`)
}

func TestNoActions_Reservations(t *testing.T) {
	_, err := NoActions{}.Reserve(t.Context(), "user:a", ReserveRequest{Repo: "r", Patterns: []string{"x"}})
	require.ErrorIs(t, err, ErrReadOnly)
	for _, list := range [][]Reservation{
		must(NoActions{}.ReleasePaths(t.Context(), "user:a", "", nil)),
		must(NoActions{}.Reservations(t.Context(), "")),
		must(NoActions{}.Conflicts(t.Context(), "user:a", "r", []string{"x"})),
	} {
		require.NotNil(t, list)
		require.Empty(t, list)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
