package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/tractat-us/bee/identity"
)

// StartCursor is NoActions' only cursor: the position of a caller that has
// seen nothing.
const StartCursor Cursor = "0"

// NoActions is the Source that never has anything: Next waits out its
// timeout and returns an empty page. It is for tests and --source none.
type NoActions struct{}

var _ Source = NoActions{}

// Name implements Source.
func (NoActions) Name() string { return "none" }

// Join implements Source; it records nothing.
func (NoActions) Join(context.Context, Member) error { return nil }

// Depart implements Source; there is nothing to give back.
func (NoActions) Depart(context.Context, identity.ID) error { return nil }

func checkNoneCursor(c Cursor) error {
	if c != "" && c != StartCursor {
		return fmt.Errorf("%w: %s", ErrBadCursor, Quote(string(c)))
	}
	return nil
}

// Next waits until timeout or ctx ends and returns an empty page.
func (NoActions) Next(ctx context.Context, _ identity.ID, after Cursor, timeout time.Duration) (Page, error) {
	if err := checkNoneCursor(after); err != nil {
		return Page{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Page{}, ctx.Err()
	case <-t.C:
		return Page{Records: []Record{}, Cursor: StartCursor}, nil
	}
}

// List returns an empty page.
func (NoActions) List(_ context.Context, since Cursor) (Page, error) {
	if err := checkNoneCursor(since); err != nil {
		return Page{}, err
	}
	return Page{Records: []Record{}, Cursor: StartCursor}, nil
}

// Post implements Source; NoActions holds nothing, so it returns ErrReadOnly.
func (NoActions) Post(context.Context, Poster, Draft) (Record, error) {
	return Record{}, fmt.Errorf("post: %w (bee-mcp runs with --source none)", ErrReadOnly)
}

// PostPlan implements Source; NoActions holds nothing, so it returns
// ErrReadOnly.
func (NoActions) PostPlan(context.Context, Poster, []PlanEntry) (PostedPlan, error) {
	return PostedPlan{}, fmt.Errorf("post plan: %w (bee-mcp runs with --source none)", ErrReadOnly)
}

// Finish implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Finish(_ context.Context, _ identity.ID, id, _ string) (Record, error) {
	return Record{}, fmt.Errorf("finish %s: %w", Quote(id), ErrUnknownAction)
}

// Fail implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Fail(_ context.Context, _ identity.ID, id, _ string) (Record, error) {
	return Record{}, fmt.Errorf("fail %s: %w", Quote(id), ErrUnknownAction)
}

// Cancel implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Cancel(_ context.Context, _ Poster, id, _ string) (Record, error) {
	return Record{}, fmt.Errorf("cancel %s: %w", Quote(id), ErrUnknownAction)
}

// Answer implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Answer(_ context.Context, _ Poster, id, _ string) (Record, error) {
	return Record{}, fmt.Errorf("answer %s: %w", Quote(id), ErrUnknownAction)
}

// Decline implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Decline(_ context.Context, _ Poster, id, _ string) (Record, error) {
	return Record{}, fmt.Errorf("decline %s: %w", Quote(id), ErrUnknownAction)
}

// Get implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Get(_ context.Context, id string) (Record, error) {
	return Record{}, fmt.Errorf("action %s: %w", Quote(id), ErrUnknownAction)
}

// Await implements Source: no action exists, so any id is ErrUnknownAction.
func (NoActions) Await(_ context.Context, _ Poster, ids []string, _ time.Duration) ([]Record, error) {
	if len(ids) > 0 {
		return nil, fmt.Errorf("await %s: %w", Quote(ids[0]), ErrUnknownAction)
	}
	return []Record{}, nil
}

// Notice waits until timeout or ctx ends: there is never news.
func (NoActions) Notice(ctx context.Context, _ identity.ID, _ []string, timeout time.Duration) (Notice, bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Notice{}, false, ctx.Err()
	case <-t.C:
		return Notice{}, false, nil
	}
}

// SetWaiter implements Source; it records nothing.
func (NoActions) SetWaiter(context.Context, identity.ID, bool) error { return nil }

// Release implements Source; no action exists, so it returns ErrUnknownAction.
func (NoActions) Release(_ context.Context, _ identity.ID, id string) (Record, error) {
	return Record{}, fmt.Errorf("release %s: %w", Quote(id), ErrUnknownAction)
}

// Close implements Source.
func (NoActions) Close() error { return nil }
