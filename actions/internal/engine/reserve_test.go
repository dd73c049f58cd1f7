package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/identity"
)

// The reservations a fakeTx keeps: none, so that a departure drops
// nothing and holds nothing back.
func (t *fakeTx) LockRepo(string) error                               { return nil }
func (t *fakeTx) Reserved(Scope) ([]Held, error)                      { return nil, nil }
func (t *fakeTx) Drop(Drop) ([]Held, error)                           { return nil, nil }
func (t *fakeTx) PathActions([]string, []int64) ([]PathAction, error) { return nil, nil }
func (t *fakeTx) SetHeld(int64, string) error                         { return nil }
func (t *fakeTx) Life(identity.ID) (MemberLife, error)                { return MemberLife{}, nil }
func (t *fakeTx) AddReservation(NewReservation) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

func pats(ss ...string) []pathglob.Pattern {
	out := make([]pathglob.Pattern, len(ss))
	for i, s := range ss {
		out[i] = pathglob.MustParse(s)
	}
	return out
}

func TestScopeOf(t *testing.T) {
	s := scopeOf("r", pats("src/auth/**", "src/auth/*.go", "docs/x.md"))
	require.Equal(t, Scope{Repo: "r", Exact: []string{"", "src", "src/auth", "docs", "docs/x.md"}, Under: []string{"src/auth", "docs/x.md"}}, s)
	require.Equal(t, Scope{Repo: "r", All: true}, scopeOf("r", pats("src", "**/*.go")), "a pattern without a literal prefix needs every row")
}

func TestOverlappingAndHeldBy(t *testing.T) {
	a, c := "agent:a#00000001", "agent:c#00000002"
	rows := []Held{
		{Res: 1, Holder: a, Pattern: "src/**", Exclusive: true},
		{Res: 2, Holder: c, Pattern: "docs/*.md"},
		{Res: 3, Holder: "user:alice", Pattern: "db", Exclusive: true},
	}
	require.Empty(t, overlapping(rows, a, pats("src/x.go"), true), "a holder never conflicts with itself")
	require.Len(t, overlapping(rows, c, pats("src/x.go"), false), 1, "exclusive against shared")
	require.Empty(t, overlapping(rows, a, pats("docs/a.md"), false), "shared beside shared")
	require.Len(t, overlapping(rows, a, pats("docs/a.md"), true), 1)

	require.Equal(t, "", heldBy(rows, pats("cmd")))
	require.Equal(t, a, heldBy(rows, pats("src/x.go")), "one identity may claim it")
	require.Equal(t, c, heldBy(rows, pats("docs/a.md")), "a shared reservation holds an action back too")
	require.Equal(t, HeldByAll, heldBy(rows, pats("src/x.go", "docs/a.md")), "two holders")
	require.Equal(t, HeldByAll, heldBy(rows, pats("db/1.sql")), "a person never claims")
}

func TestMatchingAndGroup(t *testing.T) {
	since := time.Unix(100, 0)
	rows := []Held{
		{Res: 7, Holder: "agent:a#00000001", Pattern: "src/**", Exclusive: true, Action: 3, Since: since},
		{Res: 2, Holder: "agent:c#00000002", Pattern: "src/*.go", Exclusive: true, Since: since},
		{Res: 7, Holder: "agent:a#00000001", Pattern: "docs", Exclusive: true, Since: since},
		{Res: 9, Holder: "agent:d#00000003", Pattern: "src/**"},
	}
	got := group(matching(rows, "agent:x#00000009", []string{"src/main.go", "docs/x"}))
	require.Equal(t, []actions.Reservation{
		{ID: "r-2", Holder: "agent:c#00000002", Patterns: []string{"src/*.go"}, Exclusive: true, Since: since.UTC()},
		{ID: "r-7", Holder: "agent:a#00000001", Patterns: []string{"src/**", "docs"}, Exclusive: true, Action: "a-3", Since: since.UTC()},
	}, got, "shared r-9 is no conflict; oldest first")
	require.Equal(t, []actions.Reservation{}, group(nil))
}
