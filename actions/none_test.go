package actions

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNoActions_NextTimesOut(t *testing.T) {
	start := time.Now()
	p, err := NoActions{}.Next(t.Context(), "agent:x#00000000", "", 50*time.Millisecond)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records)
	require.Equal(t, StartCursor, p.Cursor)
}

func TestNoActions_NextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NoActions{}.Next(ctx, "agent:x#00000000", StartCursor, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNoActions_BadCursor(t *testing.T) {
	_, err := NoActions{}.Next(t.Context(), "agent:x#00000000", "17", time.Millisecond)
	require.ErrorIs(t, err, ErrBadCursor)
	_, err = NoActions{}.List(t.Context(), "x")
	require.ErrorIs(t, err, ErrBadCursor)
	p, err := NoActions{}.List(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, StartCursor, p.Cursor)
}

func TestNoActions_Refusals(t *testing.T) {
	_, err := NoActions{}.Post(t.Context(), "agent:x#00000000", Draft{Title: "t", Body: "b"})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = NoActions{}.PostPlan(t.Context(), "agent:x#00000000", []PlanEntry{{Key: "k", Title: "t"}})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = NoActions{}.Finish(t.Context(), "agent:x#00000000", "a1", "")
	require.ErrorIs(t, err, ErrUnknownAction)
	_, err = NoActions{}.Release(t.Context(), "agent:x#00000000", "a1")
	require.ErrorIs(t, err, ErrUnknownAction)
	_, err = NoActions{}.Answer(t.Context(), "user:ann", "a1", "yes")
	require.ErrorIs(t, err, ErrUnknownAction)
	_, err = NoActions{}.Decline(t.Context(), "user:ann", "a1", "no")
	require.ErrorIs(t, err, ErrUnknownAction)
}
