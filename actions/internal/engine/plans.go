package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tractat-us/bee/actions"
)

// errPlansNotYet answers the plan calls until the boards implement them:
// the contract is in place so that callers can be written against it.
var errPlansNotYet = fmt.Errorf("plans (after, priority, PostPlan, Plan) are not implemented on this board yet: %w", errors.ErrUnsupported)

// PostPlan implements actions.Source. Not implemented yet: it returns an
// error wrapping errors.ErrUnsupported.
func (e *Engine) PostPlan(ctx context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
	return actions.PostedPlan{}, fmt.Errorf("post plan: %w", errPlansNotYet)
}

// Plan implements actions.Board. Not implemented yet: it returns an error
// wrapping errors.ErrUnsupported.
func (e *Engine) Plan(ctx context.Context, id string) (actions.PlanGraph, error) {
	return actions.PlanGraph{}, fmt.Errorf("plan %s: %w", label(id), errPlansNotYet)
}
