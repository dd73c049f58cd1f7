package lifecycle

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/pathcheck"
)

// The adapter hands the bridge the paths, and the channel the bridge's
// answer: a denial naming each held path, an allow, or the error that
// leaves it undecided.
func TestChannelAdapter_CheckPaths(t *testing.T) {
	t.Parallel()
	since := time.Unix(1e9, 0).UTC()
	f := &fakeController{held: []pathcheck.Held{{
		Path: "/r/src/auth/login.go", Place: pathcheck.Place{Repo: "github.com/x/r", Rel: "src/auth/login.go"}, Pattern: "src/auth/**",
		Reservation: actions.Reservation{ID: "r-1", Holder: "agent:alice#0491068b", Exclusive: true, Reason: "why", Action: "a-1", Since: since},
	}}}
	req := clearctl.CheckPathsRequest{Paths: []string{"/r/src/auth/login.go", "/r/x"}, Tool: "Edit", Cwd: "/r"}
	a, err := channelAdapter{f}.CheckPaths(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, req.Paths, f.paths)
	require.Equal(t, clearctl.CheckPathsAnswer{Conflicts: []clearctl.PathConflict{{
		Path: "/r/src/auth/login.go", Repo: "github.com/x/r", Holder: "agent:alice#0491068b", Pattern: "src/auth/**",
		Exclusive: true, Reason: "why", Action: "a-1", Since: since,
	}}}, a)

	f.held = nil
	a, err = channelAdapter{f}.CheckPaths(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, clearctl.CheckPathsAnswer{Allow: true}, a)

	f.err = errors.New("board is locked")
	_, err = channelAdapter{f}.CheckPaths(t.Context(), req)
	require.ErrorContains(t, err, "board is locked")
}
