package boardpage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/termtext"
)

// What the page shows of reservations: under each live agent, the paths
// it reserves and the open actions those hold back; the same for people
// (user:NAME), after the agents; and on each held-back action, by whom.

// A reservationView is a reservation as the page shows it, its text made
// inert.
type reservationView struct {
	actions.Reservation
	Reserved moment
}

// PatternList is the reservation's patterns on one line.
func (r reservationView) PatternList() string { return strings.Join(r.Patterns, " ") }

// A holderView is a holder that is not a live agent (a person), with
// what it reserves and holds back.
type holderView struct {
	Holder    string
	Reserves  []reservationView
	HoldsBack []string // ids of the open actions its reservations hold back
}

// HeldBackHolder is who holds an open action back, for its row: "" for
// nobody.
func (a actionView) HeldBackHolder() string {
	if a.State != actions.Open || len(a.HeldBackBy) == 0 {
		return ""
	}
	return a.HeldBackBy[0].Holder
}

// HeldBackMore counts the others that hold it back too.
func (a actionView) HeldBackMore() int { return max(len(a.HeldBackBy)-1, 0) }

// PathList is the action's paths on one line.
func (a actionView) PathList() string { return strings.Join(a.Paths, " ") }

// fillReservations puts rs, the live reservations, under their holders:
// each live agent's, then each other holder's (people) in the order first
// met; with the open actions among records each holds back.
func (v *pageView) fillReservations(now time.Time, rs []actions.Reservation, records []actions.Record) {
	byHolder := map[string][]reservationView{}
	var order []string
	for _, r := range rs {
		r = shownReservation(r)
		if _, ok := byHolder[r.Holder]; !ok {
			order = append(order, r.Holder)
		}
		byHolder[r.Holder] = append(byHolder[r.Holder], reservationView{Reservation: r, Reserved: momentOf(now, r.Since)})
	}
	holdsBack := map[string][]string{}
	for _, rec := range records {
		if rec.State != actions.Open {
			continue
		}
		seen := map[string]bool{}
		for _, h := range rec.HeldBackBy {
			holder := termtext.Line(h.Holder)
			if !seen[holder] {
				seen[holder] = true
				holdsBack[holder] = append(holdsBack[holder], termtext.Line(rec.ID))
			}
			if _, ok := byHolder[holder]; !ok {
				byHolder[holder] = nil
				order = append(order, holder)
			}
		}
	}
	agents := map[string]bool{}
	for i := range v.Agents {
		id := string(v.Agents[i].ID) // made inert by shownMember
		agents[id] = true
		v.Agents[i].Reserves, v.Agents[i].HoldsBack = byHolder[id], holdsBack[id]
	}
	for _, h := range order {
		if !agents[h] {
			v.People = append(v.People, holderView{Holder: h, Reserves: byHolder[h], HoldsBack: holdsBack[h]})
		}
	}
}

// shownReservation is r as the page shows it: its text made inert, as
// shownRecord does.
func shownReservation(r actions.Reservation) actions.Reservation {
	for _, f := range []*string{&r.ID, &r.Repo, &r.Holder, &r.Reason, &r.Action} {
		*f = termtext.Line(*f)
	}
	patterns := make([]string, len(r.Patterns))
	for i, p := range r.Patterns {
		patterns[i] = termtext.Line(p)
	}
	r.Patterns = patterns
	return r
}

// reservationsKey sums up what the page shows of reservations, to notice
// a change: a reservation made or released changes no action, so Changes
// does not report it.
func (s *Server) reservationsKey(ctx context.Context) (string, error) {
	rs, err := s.board.Reservations(ctx, "")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s|%s|%s\n", r.ID, r.Holder, strings.Join(r.Patterns, ","))
	}
	return b.String(), nil
}
