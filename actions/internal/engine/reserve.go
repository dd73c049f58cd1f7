package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tractat-us/bee/actions"
)

// errNotYet answers the reservation methods until the boards keep
// reservations.
var errNotYet = errors.New("reservations are not implemented on this board yet")

// Reserve implements actions.Source.
func (e *Engine) Reserve(ctx context.Context, who actions.Poster, r actions.ReserveRequest) (actions.Reservation, error) {
	return actions.Reservation{}, fmt.Errorf("reserve: %w", errNotYet)
}

// ReleasePaths implements actions.Source.
func (e *Engine) ReleasePaths(ctx context.Context, who actions.Poster, repo string, patterns []string) ([]actions.Reservation, error) {
	return nil, fmt.Errorf("release paths: %w", errNotYet)
}

// Reservations implements actions.Source.
func (e *Engine) Reservations(ctx context.Context, repo string) ([]actions.Reservation, error) {
	return nil, fmt.Errorf("reservations: %w", errNotYet)
}

// Conflicts implements actions.Source.
func (e *Engine) Conflicts(ctx context.Context, who actions.Poster, repo string, paths []string) ([]actions.Reservation, error) {
	return nil, fmt.Errorf("conflicts: %w", errNotYet)
}
