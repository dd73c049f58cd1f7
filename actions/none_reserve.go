package actions

import (
	"context"
	"fmt"
)

// Reserve implements Source; NoActions holds nothing, so it returns
// ErrReadOnly.
func (NoActions) Reserve(context.Context, Poster, ReserveRequest) (Reservation, error) {
	return Reservation{}, fmt.Errorf("reserve: %w (bee-mcp runs with --source none)", ErrReadOnly)
}

// ReleasePaths implements Source: nothing is reserved, so nothing is
// dropped.
func (NoActions) ReleasePaths(context.Context, Poster, string, []string) ([]Reservation, error) {
	return []Reservation{}, nil
}

// Reservations implements Source: there are none.
func (NoActions) Reservations(context.Context, string) ([]Reservation, error) {
	return []Reservation{}, nil
}

// Conflicts implements Source: nothing is reserved, so nothing conflicts.
func (NoActions) Conflicts(context.Context, Poster, string, []string) ([]Reservation, error) {
	return []Reservation{}, nil
}
