package bridge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// closeCounting is a fake source that counts its Closes.
type closeCounting struct {
	*actionstest.Source
	closed atomic.Int32
}

func (c *closeCounting) Close() error {
	c.closed.Add(1)
	return nil
}

// A setup whose bridge ends while the source opens never joins.
func TestStart_AbandonedBeforeJoin(t *testing.T) {
	src := &closeCounting{Source: &actionstest.Source{}}
	opening, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	p := Start(ctx, Config{Agent: "abandon"}, func() (actions.Source, error) {
		close(opening)
		<-release
		return src, nil
	})
	<-opening
	cancel()
	close(release)
	_, err := p.Wait(t.Context())
	require.ErrorIs(t, err, ErrSetupAbandoned)
	require.Empty(t, src.Joined(), "an abandoned setup does not join")
	require.Equal(t, int32(1), src.closed.Load())
}

// A setup whose join completes after its bridge began ending departs at
// once: nobody else would, and the identity would look live for a lease.
func TestStart_AbandonedDuringJoin(t *testing.T) {
	joining, release := make(chan struct{}), make(chan struct{})
	src := &closeCounting{Source: &actionstest.Source{
		// A join already past the point of no return: it commits whatever
		// happens to ctx.
		JoinFunc: func(context.Context, actions.Member) error {
			close(joining)
			<-release
			return nil
		},
	}}
	ctx, cancel := context.WithCancel(t.Context())
	p := Start(ctx, Config{Agent: "abandon"}, func() (actions.Source, error) { return src, nil })
	<-joining
	cancel()
	close(release)
	wctx, wcancel := context.WithTimeout(t.Context(), testtime.Bound(10*time.Second))
	defer wcancel()
	_, err := p.Wait(wctx)
	require.ErrorIs(t, err, ErrSetupAbandoned)
	joined := src.Joined()
	require.Len(t, joined, 1)
	require.Equal(t, []identity.ID{joined[0].ID}, src.Departed(), "the identity that joined departed before Wait returned")
	require.Equal(t, int32(1), src.closed.Load())
}

// A setup that finishes before its bridge ends is the bridge's to depart.
func TestStart_Ready(t *testing.T) {
	src := &closeCounting{Source: &actionstest.Source{}}
	p := Start(t.Context(), Config{Agent: "ready"}, func() (actions.Source, error) { return src, nil })
	s, err := p.Wait(t.Context())
	require.NoError(t, err)
	require.Empty(t, src.Departed())
	require.NoError(t, s.Depart(t.Context()))
	require.Len(t, src.Departed(), 1)
}
