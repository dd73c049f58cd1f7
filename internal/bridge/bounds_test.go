package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// stuckRelease is a source whose Release waits for its context to end (a
// board whose lock another process holds), and which records when, after
// start, each Release gave up.
type stuckRelease struct {
	*actionstest.Source
	start time.Time
	mu    sync.Mutex
	ended []time.Duration
}

func newStuckRelease() *stuckRelease {
	s := &stuckRelease{start: time.Now()}
	s.Source = &actionstest.Source{ReleaseFunc: func(ctx context.Context, _ identity.ID, _ string) (actions.Record, error) {
		<-ctx.Done()
		s.mu.Lock()
		s.ended = append(s.ended, time.Since(s.start))
		s.mu.Unlock()
		return actions.Record{}, ctx.Err()
	}}
	return s
}

func (s *stuckRelease) endedAt() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ended...)
}

// The give-back worker's release of an undelivered claim gives up after
// 2 s: a stuck board does not hold the worker for longer. Close cuts a
// release in progress short at once (the departure before it gave every
// claim back).
func TestGiveBack_ReleaseBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newStuckRelease()
		s, err := NewSession(t.Context(), Config{Agent: "x", Source: src})
		require.NoError(t, err)
		s.GiveBackUndelivered(json.RawMessage(`{"_meta":{"bee/claims":[{"id":"a-1","holder":"agent:x#00000000"}]}}`))
		time.Sleep(time.Minute)
		require.Equal(t, []time.Duration{2 * time.Second}, src.endedAt())

		s.GiveBackUndelivered(json.RawMessage(`{"_meta":{"bee/claims":[{"id":"a-2","holder":"agent:x#00000000"}]}}`))
		synctest.Wait() // the release is stuck
		closing := time.Now()
		require.NoError(t, s.Close())
		require.Equal(t, []time.Duration{2 * time.Second, time.Minute}, src.endedAt())
		require.Zero(t, time.Since(closing), "Close cut the stuck release short")
	})
}

// A claim a wake made goes back HandoverWithin after the wake, and that
// release too gives up after 2 s.
func TestWaitForWork_HandoverReleaseBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newStuckRelease()
		var once sync.Once
		src.NoticeFunc = func(ctx context.Context, who identity.ID, _ []string, _ time.Duration) (actions.Notice, bool, error) {
			found := false
			once.Do(func() { found = true })
			if !found {
				<-ctx.Done()
				return actions.Notice{}, false, ctx.Err()
			}
			return actions.Notice{Kind: actions.NoticeWork, Record: actions.Record{ID: "a-1", Title: "t", From: "user:x", State: actions.Claimed, Holder: string(who)}}, true, nil
		}
		s := newWakeSession(t, src, time.Minute)
		require.True(t, arm(t, s, WaitRequest{}).next().Wake)
		time.Sleep(time.Hour)
		require.Equal(t, []time.Duration{time.Minute + 2*time.Second}, src.endedAt())
	})
}

// A setup whose join lands after its bridge began ending departs within
// 200 ms (abandonBound), however stuck the board is: Wait returns then.
func TestStart_AbandonedDepartureBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		joining, release := make(chan struct{}), make(chan struct{})
		src := &closeCounting{Source: &actionstest.Source{
			JoinFunc: func(context.Context, actions.Member) error {
				close(joining)
				<-release
				return nil
			},
			DepartFunc: func(ctx context.Context, _ identity.ID) error {
				<-ctx.Done() // the board is stuck
				return ctx.Err()
			},
		}}
		ctx, cancel := context.WithCancel(t.Context())
		p := Start(ctx, Config{Agent: "abandon"}, func() (actions.Source, error) { return src, nil })
		<-joining
		cancel()
		start := time.Now()
		close(release)
		_, err := p.Wait(t.Context())
		require.ErrorIs(t, err, ErrSetupAbandoned)
		require.Equal(t, abandonBound, time.Since(start))
		require.Equal(t, int32(1), src.closed.Load())
	})
}
