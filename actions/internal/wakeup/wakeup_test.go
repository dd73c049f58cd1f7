package wakeup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSignal_Fire(t *testing.T) {
	s := NewSignal()
	x, y, every := s.ForAgent("x"), s.ForAgent("y"), s.Every()
	require.Equal(t, x, s.ForAgent("x"), "waiters of one agent share a channel")

	s.Fire("x")
	require.True(t, Closed(x))
	require.True(t, Closed(every))
	require.False(t, Closed(y))

	x, every = s.ForAgent("x"), s.Every()
	require.False(t, Closed(x), "a fresh channel after the event")
	s.Fire(People)
	require.True(t, Closed(every))
	require.False(t, Closed(x))
	require.False(t, Closed(y))

	s.Fire(Everyone)
	require.True(t, Closed(x))
	require.True(t, Closed(y))
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ name, to, recipient, poster string }{
		{"anyone", "", Everyone, People},
		{"agent name", "reviewer", "reviewer", People},
		{"identity", "agent:re-view.er_2#0123abcd", "re-view.er_2", "re-view.er_2"},
		{"person", "user:alice", People, People},
		{"people", "people", People, People},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.recipient, ForRecipient(tc.to))
			require.Equal(t, tc.poster, ForPoster(tc.to))
		})
	}
}
