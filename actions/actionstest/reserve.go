package actionstest

import (
	"context"

	"github.com/tractat-us/bee/actions"
)

// ReserveFuncs are the fake's answers to Reserve, ReleasePaths,
// Reservations and Conflicts; a nil field answers as actions.NoActions.
type ReserveFuncs struct {
	ReserveFunc      func(ctx context.Context, who actions.Poster, r actions.ReserveRequest) (actions.Reservation, error)
	ReleasePathsFunc func(ctx context.Context, who actions.Poster, repo string, patterns []string) ([]actions.Reservation, error)
	ReservationsFunc func(ctx context.Context, repo string) ([]actions.Reservation, error)
	ConflictsFunc    func(ctx context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error)
}

// Reserve implements actions.Source.
func (s *Source) Reserve(ctx context.Context, who actions.Poster, r actions.ReserveRequest) (actions.Reservation, error) {
	if s.ReserveFunc != nil {
		return s.ReserveFunc(ctx, who, r)
	}
	return actions.NoActions{}.Reserve(ctx, who, r)
}

// ReleasePaths implements actions.Source.
func (s *Source) ReleasePaths(ctx context.Context, who actions.Poster, repo string, patterns []string) ([]actions.Reservation, error) {
	if s.ReleasePathsFunc != nil {
		return s.ReleasePathsFunc(ctx, who, repo, patterns)
	}
	return actions.NoActions{}.ReleasePaths(ctx, who, repo, patterns)
}

// Reservations implements actions.Source.
func (s *Source) Reservations(ctx context.Context, repo string) ([]actions.Reservation, error) {
	if s.ReservationsFunc != nil {
		return s.ReservationsFunc(ctx, repo)
	}
	return actions.NoActions{}.Reservations(ctx, repo)
}

// Conflicts implements actions.Source.
func (s *Source) Conflicts(ctx context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error) {
	if s.ConflictsFunc != nil {
		return s.ConflictsFunc(ctx, who, repo, paths)
	}
	return actions.NoActions{}.Conflicts(ctx, who, repo, paths)
}
