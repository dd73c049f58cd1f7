package lifecycle

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/bridge"
	"github.com/tractat-us/bee/internal/pathcheck"
	"github.com/tractat-us/bee/runfile"
)

// fakeController records what the adapter hands the bridge.
type fakeController struct {
	retire bridge.RetireRequest
	wait   bridge.WaitRequest
	cause  chan error
	paths  []string
	held   []pathcheck.Held
	err    error
}

func (f *fakeController) CheckPaths(_ context.Context, paths []string) ([]pathcheck.Held, error) {
	f.paths = paths
	return f.held, f.err
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

// A starting bridge removes the run files of bridges that died without a
// word (SIGKILL), and no live one's.
func TestOpenChannel_SweepsStaleRunFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	live := runfile.Entry{Port: 40100, Token: tok, PID: os.Getpid()}
	require.NoError(t, runfile.Write(dir, 1, live)) // init stands for a live claude
	stale := runfile.Entry{Port: 40200, Token: tok + "x", PID: dead.Process.Pid}
	require.NoError(t, runfile.Write(dir, os.Getppid(), stale))

	ch, err := openChannel(dir, os.Getpid(), &fakeController{cause: make(chan error, 1)}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer ch.close(slog.New(slog.DiscardHandler))

	_, err = runfile.Read(dir, os.Getppid())
	require.ErrorIs(t, err, fs.ErrNotExist, "the dead bridge's run file is removed")
	got, err := runfile.Read(dir, 1)
	require.NoError(t, err)
	require.Equal(t, live, got, "a live bridge's run file stays")
	_, err = runfile.Read(dir, os.Getpid())
	require.NoError(t, err, "the new bridge's own run file is there")
}
