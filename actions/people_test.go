package actions

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckRecipient_People(t *testing.T) {
	for _, to := range []string{"", "reviewer", "agent:reviewer#0491068b", "user:alice", "people"} {
		require.NoError(t, CheckRecipient(to), "to %q", to)
	}
	for _, to := range []string{"user:", "user:bad name", "user:-x", "user:people", "agent:people#0491068b", "peo ple"} {
		require.ErrorIs(t, CheckRecipient(to), ErrBadRecipient, "to %q", to)
	}
	require.ErrorContains(t, CheckRecipient("user:bad name"), "is not a person")
}

func TestForPeople(t *testing.T) {
	for to, want := range map[string]bool{
		"": false, "reviewer": false, "agent:reviewer#0491068b": false, "People": false,
		"user:alice": true, "people": true, "user:": false,
	} {
		require.Equal(t, want, ForPeople(to), "to %q", to)
	}
}

func TestAskedOf(t *testing.T) {
	alice := Poster("user:alice")
	for _, tc := range []struct {
		r    Record
		p    Poster
		want bool
	}{
		{Record{To: "user:alice", State: Open}, alice, true},
		{Record{To: "people", State: Open}, alice, true},
		{Record{To: "user:bob", State: Open}, alice, false},
		{Record{To: "user:alice", State: Done}, alice, false},
		{Record{To: "", State: Open}, alice, false},
		{Record{To: "people", State: Open}, "agent:x#0491068b", false},
	} {
		require.Equal(t, tc.want, AskedOf(tc.r, tc.p), "%+v by %s", tc.r, tc.p)
	}
}

func TestCheckReply(t *testing.T) {
	q := func(to string) Record { return Record{ID: "a-3", To: to, State: Open} }
	require.NoError(t, CheckReply("answer", "user:alice", q("user:alice")))
	require.NoError(t, CheckReply("answer", "user:bob", q("people")))

	err := CheckReply("answer", "user:bob", q("user:alice"))
	require.ErrorIs(t, err, ErrNotForPerson)
	require.ErrorContains(t, err, "is for user:alice, not user:bob")

	err = CheckReply("decline", "user:bob", q("reviewer"))
	require.ErrorIs(t, err, ErrNotForPerson)
	require.ErrorContains(t, err, "is for reviewer, not for people")
	require.ErrorContains(t, CheckReply("answer", "user:bob", q("")), "is for anyone")

	require.ErrorIs(t, CheckReply("answer", "agent:x#0491068b", q("people")), ErrBadPoster)
	require.ErrorIs(t, CheckReply("answer", "nobody", q("people")), ErrBadPoster)
}
