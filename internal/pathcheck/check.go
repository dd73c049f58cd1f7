package pathcheck

import (
	"context"
	"fmt"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/clearctl/wire"
)

// A Conflicter says which live exclusive reservations of anyone but who
// match files of repo (actions.Source's Conflicts).
type Conflicter interface {
	Conflicts(ctx context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error)
}

// A Held is one file a tool would write that someone else's exclusive
// reservation holds.
type Held struct {
	// Path is the file as it was asked about.
	Path string
	// Place is where the write lands.
	Place
	// Pattern is the reservation's pattern that matches Place.Rel.
	Pattern string
	// Reservation is the reservation that holds it.
	Reservation actions.Reservation
}

// Check returns the files among paths (absolute) that a live exclusive
// reservation of anyone but who holds: for each path in order, each
// reservation that matches it, oldest first. Files placed nowhere (see
// Place) are never held. It asks board once per repository the paths
// land in. It returns an error naming the path when one cannot be placed,
// and the board's error when it cannot answer: then nothing is decided.
func (l *Locator) Check(ctx context.Context, board Conflicter, who actions.Poster, paths []string) ([]Held, error) {
	places := make([]Place, len(paths))
	placed := make([]bool, len(paths))
	byRepo := map[string][]string{} // the repo-relative paths to ask about, each once
	var repos []string              // in the order first met
	seen := map[Place]bool{}
	for i, p := range paths {
		pl, ok, err := l.Place(p)
		if err != nil {
			return nil, fmt.Errorf("where %s would be written: %w", p, err)
		}
		if !ok {
			continue
		}
		places[i], placed[i] = pl, true
		if seen[pl] {
			continue
		}
		seen[pl] = true
		if _, ok := byRepo[pl.Repo]; !ok {
			repos = append(repos, pl.Repo)
		}
		byRepo[pl.Repo] = append(byRepo[pl.Repo], pl.Rel)
	}
	held := map[string][]actions.Reservation{}
	for _, r := range repos {
		rs, err := board.Conflicts(ctx, who, r, byRepo[r])
		if err != nil {
			return nil, fmt.Errorf("ask the board about %d paths of %s: %w", len(byRepo[r]), r, err)
		}
		held[r] = rs
	}
	m := matcher{}
	var out []Held
	for i, p := range paths {
		if !placed[i] {
			continue
		}
		for _, res := range held[places[i].Repo] {
			if pat, ok := m.first(res.Patterns, places[i].Rel); ok {
				out = append(out, Held{Path: p, Place: places[i], Pattern: pat, Reservation: res})
			}
		}
	}
	return out, nil
}

// A matcher matches patterns against paths, parsing each pattern once.
type matcher map[string]pathglob.Pattern

// first returns the first of patterns that matches rel. A pattern that
// does not parse (a board keeps only parsed ones) matches nothing.
func (m matcher) first(patterns []string, rel string) (string, bool) {
	for _, s := range patterns {
		p, ok := m[s]
		if !ok {
			p, _ = pathglob.Parse(s) // the zero Pattern matches nothing
			m[s] = p
		}
		if pathglob.Match(p, rel) {
			return s, true
		}
	}
	return "", false
}

// Answer is the guards' answer (POST /check-paths, `bee reservations
// check`) for held: allow when it is empty, else deny naming each held
// file, cut at wire.MaxConflicts and counted in More beyond.
func Answer(held []Held) wire.CheckPathsAnswer {
	if len(held) == 0 {
		return wire.CheckPathsAnswer{Allow: true}
	}
	var a wire.CheckPathsAnswer
	for _, h := range held[:min(len(held), wire.MaxConflicts)] {
		r := h.Reservation
		a.Conflicts = append(a.Conflicts, wire.PathConflict{
			Path:      h.Path,
			Repo:      h.Repo,
			Holder:    r.Holder,
			Pattern:   h.Pattern,
			Exclusive: r.Exclusive,
			Reason:    r.Reason,
			Action:    r.Action,
			Since:     r.Since,
		})
	}
	a.More = len(held) - len(a.Conflicts)
	return a
}
