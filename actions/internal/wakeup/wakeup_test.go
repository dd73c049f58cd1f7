package wakeup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSignal_Fire(t *testing.T) {
	s := NewSignal()
	x, y, every := s.ForAgent("x"), s.ForAgent("y"), s.Every()
	require.Equal(t, x, s.ForAgent("x"), "waiters of one agent share a channel")

	s.Fire("x")
	require.True(t, closed(x))
	require.True(t, closed(every))
	require.False(t, closed(y))

	x, every = s.ForAgent("x"), s.Every()
	require.False(t, closed(x), "a fresh channel after the event")
	s.Fire(People)
	require.True(t, closed(every))
	require.False(t, closed(x))
	require.False(t, closed(y))

	s.Fire(Everyone)
	require.True(t, closed(x))
	require.True(t, closed(y))
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ name, to, recipient, poster string }{
		{"anyone", "", Everyone, People},
		{"agent name", "reviewer", "reviewer", People},
		{"identity", "agent:re-view.er_2#0123abcd", "re-view.er_2", "re-view.er_2"},
		{"person", "user:alice", "user:alice", People},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.recipient, ForRecipient(tc.to))
			require.Equal(t, tc.poster, ForPoster(tc.to))
		})
	}
}
