// Package actionstest provides a fake actions.Source for tests of code that
// uses a Source: each method is a func field, and a nil field behaves like
// actions.NoActions. It also counts calls, so tests can assert what
// happened.
package actionstest

import (
	"context"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// Source is a fake actions.Source. Set the func fields before use; do not
// change them while calls are in flight.
type Source struct {
	NameFunc    func() string
	JoinFunc    func(ctx context.Context, m actions.Member) error
	DepartFunc  func(ctx context.Context, who identity.ID) error
	NextFunc    func(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error)
	ListFunc    func(ctx context.Context, since actions.Cursor) (actions.Page, error)
	PostFunc    func(ctx context.Context, by actions.Poster, d actions.Draft) (actions.Record, error)
	PlanFunc    func(ctx context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error)
	FinishFunc  func(ctx context.Context, who identity.ID, id, result string) (actions.Record, error)
	ReleaseFunc func(ctx context.Context, who identity.ID, id string) (actions.Record, error)
	FailFunc    func(ctx context.Context, who identity.ID, id, reason string) (actions.Record, error)
	CancelFunc  func(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error)
	AnswerFunc  func(ctx context.Context, by actions.Poster, id, text string) (actions.Record, error)
	DeclineFunc func(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error)
	GetFunc     func(ctx context.Context, id string) (actions.Record, error)
	AwaitFunc   func(ctx context.Context, by actions.Poster, ids []string, timeout time.Duration) ([]actions.Record, error)
	NoticeFunc  func(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (actions.Notice, bool, error)
	WaiterFunc  func(ctx context.Context, who identity.ID, armed bool) error

	// ReserveFuncs holds the func fields of Reserve, ReleasePaths,
	// Reservations and Conflicts.
	ReserveFuncs

	mu       sync.Mutex
	joined   []actions.Member
	departed []identity.ID
	released []string
}

var _ actions.Source = (*Source)(nil)

// Joined returns the members Join was called with, in order.
func (s *Source) Joined() []actions.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]actions.Member(nil), s.joined...)
}

// Departed returns the identities Depart was called with, in order.
func (s *Source) Departed() []identity.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]identity.ID(nil), s.departed...)
}

// Released returns the action ids Release was called with, in order.
func (s *Source) Released() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.released...)
}

// Name implements actions.Source.
func (s *Source) Name() string {
	if s.NameFunc != nil {
		return s.NameFunc()
	}
	return "fake"
}

// Join implements actions.Source.
func (s *Source) Join(ctx context.Context, m actions.Member) error {
	s.mu.Lock()
	s.joined = append(s.joined, m)
	s.mu.Unlock()
	if s.JoinFunc != nil {
		return s.JoinFunc(ctx, m)
	}
	return nil
}

// Depart implements actions.Source.
func (s *Source) Depart(ctx context.Context, who identity.ID) error {
	s.mu.Lock()
	s.departed = append(s.departed, who)
	s.mu.Unlock()
	if s.DepartFunc != nil {
		return s.DepartFunc(ctx, who)
	}
	return nil
}

// Next implements actions.Source.
func (s *Source) Next(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	if s.NextFunc != nil {
		return s.NextFunc(ctx, who, after, timeout)
	}
	return actions.NoActions{}.Next(ctx, who, after, timeout)
}

// List implements actions.Source.
func (s *Source) List(ctx context.Context, since actions.Cursor) (actions.Page, error) {
	if s.ListFunc != nil {
		return s.ListFunc(ctx, since)
	}
	return actions.NoActions{}.List(ctx, since)
}

// Post implements actions.Source.
func (s *Source) Post(ctx context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
	if s.PostFunc != nil {
		return s.PostFunc(ctx, by, d)
	}
	return actions.NoActions{}.Post(ctx, by, d)
}

// PostPlan implements actions.Source.
func (s *Source) PostPlan(ctx context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
	if s.PlanFunc != nil {
		return s.PlanFunc(ctx, by, plan)
	}
	return actions.NoActions{}.PostPlan(ctx, by, plan)
}

// Finish implements actions.Source.
func (s *Source) Finish(ctx context.Context, who identity.ID, id, result string) (actions.Record, error) {
	if s.FinishFunc != nil {
		return s.FinishFunc(ctx, who, id, result)
	}
	return actions.NoActions{}.Finish(ctx, who, id, result)
}

// Release implements actions.Source.
func (s *Source) Release(ctx context.Context, who identity.ID, id string) (actions.Record, error) {
	s.mu.Lock()
	s.released = append(s.released, id)
	s.mu.Unlock()
	if s.ReleaseFunc != nil {
		return s.ReleaseFunc(ctx, who, id)
	}
	return actions.NoActions{}.Release(ctx, who, id)
}

// Fail implements actions.Source.
func (s *Source) Fail(ctx context.Context, who identity.ID, id, reason string) (actions.Record, error) {
	if s.FailFunc != nil {
		return s.FailFunc(ctx, who, id, reason)
	}
	return actions.NoActions{}.Fail(ctx, who, id, reason)
}

// Cancel implements actions.Source.
func (s *Source) Cancel(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error) {
	if s.CancelFunc != nil {
		return s.CancelFunc(ctx, by, id, reason)
	}
	return actions.NoActions{}.Cancel(ctx, by, id, reason)
}

// Answer implements actions.Source.
func (s *Source) Answer(ctx context.Context, by actions.Poster, id, text string) (actions.Record, error) {
	if s.AnswerFunc != nil {
		return s.AnswerFunc(ctx, by, id, text)
	}
	return actions.NoActions{}.Answer(ctx, by, id, text)
}

// Decline implements actions.Source.
func (s *Source) Decline(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error) {
	if s.DeclineFunc != nil {
		return s.DeclineFunc(ctx, by, id, reason)
	}
	return actions.NoActions{}.Decline(ctx, by, id, reason)
}

// Get implements actions.Source.
func (s *Source) Get(ctx context.Context, id string) (actions.Record, error) {
	if s.GetFunc != nil {
		return s.GetFunc(ctx, id)
	}
	return actions.NoActions{}.Get(ctx, id)
}

// Await implements actions.Source.
func (s *Source) Await(ctx context.Context, by actions.Poster, ids []string, timeout time.Duration) ([]actions.Record, error) {
	if s.AwaitFunc != nil {
		return s.AwaitFunc(ctx, by, ids, timeout)
	}
	return actions.NoActions{}.Await(ctx, by, ids, timeout)
}

// Notice implements actions.Source.
func (s *Source) Notice(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (actions.Notice, bool, error) {
	if s.NoticeFunc != nil {
		return s.NoticeFunc(ctx, who, skip, timeout)
	}
	return actions.NoActions{}.Notice(ctx, who, skip, timeout)
}

// SetWaiter implements actions.Source.
func (s *Source) SetWaiter(ctx context.Context, who identity.ID, armed bool) error {
	if s.WaiterFunc != nil {
		return s.WaiterFunc(ctx, who, armed)
	}
	return nil
}

// Close implements actions.Source.
func (s *Source) Close() error { return nil }
