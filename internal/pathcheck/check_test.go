package pathcheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/internal/pathcheck"
)

// fakeBoard answers Conflicts by the contract's rule over a list of
// reservations: exclusive, another holder, the repository, a pattern that
// matches one of the paths (only those patterns are kept). It records
// every question.
type fakeBoard struct {
	held  []actions.Reservation
	asked []asked
	err   error
}

type asked struct {
	who   actions.Poster
	repo  string
	paths []string
}

func (b *fakeBoard) Conflicts(_ context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error) {
	b.asked = append(b.asked, asked{who, repo, slices.Clone(paths)})
	if b.err != nil {
		return nil, b.err
	}
	out := []actions.Reservation{}
	for _, r := range b.held {
		if !r.Exclusive || r.Holder == string(who) || r.Repo != repo {
			continue
		}
		var kept []string
		for _, s := range r.Patterns {
			p := pathglob.MustParse(s)
			if slices.ContainsFunc(paths, func(f string) bool { return pathglob.Match(p, f) }) {
				kept = append(kept, s)
			}
		}
		if kept != nil {
			r.Patterns = kept
			out = append(out, r)
		}
	}
	return out, nil
}

func TestLocator_Check(t *testing.T) {
	tmp := tempDir(t)
	bee := newRepo(t, filepath.Join(tmp, "bee"), "git@github.com:tractat-us/bee.git")
	other := newRepo(t, filepath.Join(tmp, "other"), "git@github.com:tractat-us/other.git")
	plain := filepath.Join(tmp, "plain")
	require.NoError(t, os.MkdirAll(plain, 0o755))
	const beeName, otherName = "github.com/tractat-us/bee", "github.com/tractat-us/other"
	since := time.Unix(1e9, 0).UTC()
	alice := actions.Reservation{ID: "r-1", Repo: beeName, Holder: "agent:alice#0491068b", Patterns: []string{"docs/**", "src/auth/**"},
		Exclusive: true, Reason: "moving sessions to the store", Action: "a-12", Since: since}
	bob := actions.Reservation{ID: "r-2", Repo: beeName, Holder: "user:bob", Patterns: []string{"src/auth/login.go"}, Exclusive: true, Since: since.Add(time.Minute)}
	shared := actions.Reservation{ID: "r-3", Repo: beeName, Holder: "agent:carol#00000001", Patterns: []string{"src/**"}, Since: since}
	mine := actions.Reservation{ID: "r-4", Repo: beeName, Holder: "agent:me#00000002", Patterns: []string{"src/db/**"}, Exclusive: true, Since: since}
	theirs := actions.Reservation{ID: "r-5", Repo: otherName, Holder: "agent:dave#00000003", Patterns: []string{"src/**"}, Exclusive: true, Since: since}
	board := &fakeBoard{held: []actions.Reservation{alice, bob, shared, mine, theirs}}
	l := pathcheck.NewLocator(&pathcheck.Options{Home: locate(t, bee)})
	me := actions.Poster("agent:me#00000002")

	paths := []string{
		filepath.Join(bee, "src/auth/login.go"), // alice's and bob's
		filepath.Join(bee, "src/db/store.go"),   // mine: never held from me
		filepath.Join(bee, "README.md"),         // nobody's (carol's is shared, and elsewhere)
		filepath.Join(other, "src/x.go"),        // dave's, in another repository
		filepath.Join(plain, "notes.md"),        // nowhere
		filepath.Join(bee, "src/auth/login.go"), // asked twice: the board hears it once
	}
	held, err := l.Check(t.Context(), board, me, paths)
	require.NoError(t, err)
	type got struct{ path, rel, pattern, id string }
	var gots []got
	for _, h := range held {
		gots = append(gots, got{h.Path, h.Rel, h.Pattern, h.Reservation.ID})
	}
	require.Equal(t, []got{
		{paths[0], "src/auth/login.go", "src/auth/**", "r-1"},
		{paths[0], "src/auth/login.go", "src/auth/login.go", "r-2"},
		{paths[3], "src/x.go", "src/**", "r-5"},
		{paths[5], "src/auth/login.go", "src/auth/**", "r-1"},
		{paths[5], "src/auth/login.go", "src/auth/login.go", "r-2"},
	}, gots)
	require.Equal(t, []asked{
		{me, beeName, []string{"src/auth/login.go", "src/db/store.go", "README.md"}},
		{me, otherName, []string{"src/x.go"}},
	}, board.asked, "one question per repository, each path once, none about the plain folder")

	// Alice's own files are free for her.
	held, err = l.Check(t.Context(), board, "agent:alice#0491068b", paths[:1])
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "r-2", held[0].Reservation.ID)

	// Nothing placed: the board is not asked.
	board.asked = nil
	held, err = l.Check(t.Context(), board, me, []string{filepath.Join(plain, "x")})
	require.NoError(t, err)
	require.Empty(t, held)
	require.Empty(t, board.asked)

	// The board cannot answer: nothing is decided.
	board.err = errors.New("board is locked")
	_, err = l.Check(t.Context(), board, me, paths[:1])
	require.ErrorContains(t, err, "board is locked")
	board.err = nil
	_, err = l.Check(t.Context(), board, me, []string{"relative.go"})
	require.ErrorContains(t, err, "relative.go")
}

func TestAnswer(t *testing.T) {
	require.Equal(t, wire.CheckPathsAnswer{Allow: true}, pathcheck.Answer(nil))

	since := time.Unix(1e9, 0).UTC()
	h := pathcheck.Held{
		Path: "/r/src/auth/login.go", Place: pathcheck.Place{Repo: "github.com/x/r", Rel: "src/auth/login.go"}, Pattern: "src/auth/**",
		Reservation: actions.Reservation{ID: "r-1", Repo: "github.com/x/r", Holder: "agent:alice#0491068b", Patterns: []string{"src/auth/**"},
			Exclusive: true, Reason: "why", Action: "a-1", Since: since},
	}
	a := pathcheck.Answer([]pathcheck.Held{h})
	require.NoError(t, a.Validate())
	require.Equal(t, wire.CheckPathsAnswer{Conflicts: []wire.PathConflict{{
		Path: h.Path, Repo: "github.com/x/r", Holder: "agent:alice#0491068b", Pattern: "src/auth/**",
		Exclusive: true, Reason: "why", Action: "a-1", Since: since,
	}}}, a)

	var many []pathcheck.Held
	for i := range wire.MaxConflicts + 5 {
		h.Path = fmt.Sprintf("/r/src/auth/%d.go", i)
		many = append(many, h)
	}
	a = pathcheck.Answer(many)
	require.NoError(t, a.Validate())
	require.Len(t, a.Conflicts, wire.MaxConflicts)
	require.Equal(t, 5, a.More)
	require.Equal(t, "/r/src/auth/0.go", a.Conflicts[0].Path)
}
