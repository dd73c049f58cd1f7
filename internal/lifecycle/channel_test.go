package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/bridge"
)

// fakeController records what the adapter hands the bridge.
type fakeController struct {
	retire bridge.RetireRequest
	wait   bridge.WaitRequest
	cause  chan error
}

func (f *fakeController) Retire(_ context.Context, req bridge.RetireRequest) (bridge.Retirement, error) {
	f.retire = req
	return bridge.Retirement{Retired: "agent:x#00000001", Current: identity.ID("agent:x#00000002")}, nil
}

func (f *fakeController) WaitForWork(ctx context.Context, req bridge.WaitRequest) bridge.WakeAnswer {
	f.wait = req
	<-ctx.Done()
	f.cause <- context.Cause(ctx)
	return bridge.WakeAnswer{Reason: bridge.ReasonShuttingDown}
}

func TestChannelAdapter_Reasons(t *testing.T) {
	t.Parallel()
	// bee-hook acts on these texts; the bridge names them in its own terms.
	require.Equal(t, clearctl.ReasonShuttingDown, bridge.ReasonShuttingDown)
	require.Equal(t, clearctl.ReasonSuperseded, bridge.ReasonSuperseded)
}

func TestChannelAdapter_Retire(t *testing.T) {
	t.Parallel()
	f := &fakeController{}
	res, err := channelAdapter{f}.Retire(t.Context(), clearctl.RetireRequest{SessionID: "s-2", TranscriptPath: "/t"})
	require.NoError(t, err)
	require.Equal(t, bridge.RetireRequest{SessionID: "s-2", TranscriptPath: "/t"}, f.retire)
	require.Equal(t, clearctl.RetireResponse{Retired: "agent:x#00000001", Current: "agent:x#00000002"}, res)
}

func TestChannelAdapter_WaitCauses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cause error
		want  error
	}{
		{"channel closed", clearctl.ErrClosed, bridge.ErrShuttingDown},
		{"waiter gone", context.Canceled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeController{cause: make(chan error, 1)}
			ctx, cancel := context.WithCancelCause(t.Context())
			done := make(chan clearctl.WaitResponse, 1)
			go func() {
				done <- channelAdapter{f}.WaitForWork(ctx, clearctl.WaitRequest{PID: 7, HookEventName: "Stop", RearmSeconds: 3})
			}()
			cancel(tc.cause)
			require.ErrorIs(t, <-f.cause, tc.want)
			require.Equal(t, clearctl.WaitResponse{Reason: clearctl.ReasonShuttingDown}, <-done)
			require.Equal(t, bridge.WaitRequest{PID: 7, HookEventName: "Stop", Rearm: 3 * time.Second}, f.wait)
		})
	}
}
