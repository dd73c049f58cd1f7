package bridge

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// /clear hands what the old identity held back to the board for another
// live identity of the agent: the cleared session's waiter, armed under
// the new identity, is not woken for it (it used to claim it back 8 ms
// later), and another session's waiter gets it.
func TestRetire_DroppedWorkGoesToAnotherIdentity(t *testing.T) {
	b := openBoard(t)
	cleared := newWakeSession(t, b, time.Minute)
	other := newWakeSession(t, b, time.Minute)
	cs := connectPending(t, Ready(cleared), nil, nil)
	rec := post(t, b, "user:alice", "tester", "dropped by /clear")
	page := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5}))
	require.Len(t, page.Records, 1)
	a := arm(t, cleared, WaitRequest{HookEventName: "Stop"})
	armedOnBoard(t, b, cleared.Identity())

	res, err := cleared.Retire(t.Context(), RetireRequest{SessionID: "s-2"})
	require.NoError(t, err)
	armedOnBoard(t, b, res.Current) // the waiter looks, as the new identity
	got, err := b.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, got.State, "back on the board, for another session")

	resp := arm(t, other, WaitRequest{HookEventName: "Stop"}).answer(t)
	require.True(t, resp.Wake, "%+v", resp)
	require.Contains(t, resp.Line, rec.ID)
	require.Contains(t, resp.Line, string(other.Identity()))
	a.wakesFirstFor(t, b, "fresh work") // the cleared session was quiet until now
}

// The cleared session is the agent's only live identity: nobody else of
// the agent could take what it held, so its waiter is woken for it.
func TestRetire_OnlyIdentityIsWokenForWhatItDropped(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	cs := connectPending(t, Ready(s), nil, nil)
	rec := post(t, b, "user:alice", "tester", "dropped by /clear")
	require.Len(t, structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 5})).Records, 1)
	a := arm(t, s, WaitRequest{HookEventName: "Stop"})
	armedOnBoard(t, b, s.Identity())
	res, err := s.Retire(t.Context(), RetireRequest{})
	require.NoError(t, err)
	resp := a.answer(t)
	require.True(t, resp.Wake)
	require.Contains(t, resp.Line, rec.ID)
	require.Contains(t, resp.Line, string(res.Current))
}

// countingHandler counts the records logged at info level or above.
type countingHandler struct {
	mu sync.Mutex
	n  int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// A waiter's registration logs one line, also when it supersedes an older
// waiter (one a turn, all day long).
func TestWaitForWork_OneLinePerRegistration(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := &countingHandler{}
		src := &actionstest.Source{NoticeFunc: func(ctx context.Context, _ identity.ID, _ []string, _ time.Duration) (actions.Notice, bool, error) {
			<-ctx.Done()
			return actions.Notice{}, false, ctx.Err()
		}}
		s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, Logger: slog.New(h)})
		require.NoError(t, err)
		t.Cleanup(s.stop)
		before := h.count()
		older := arm(t, s, WaitRequest{PID: 1, HookEventName: "SessionStart"})
		for i := range 5 {
			synctest.Wait()
			newer := arm(t, s, WaitRequest{PID: 2 + i, HookEventName: "Stop"})
			require.Equal(t, ReasonSuperseded, older.next().Reason)
			older = newer
		}
		synctest.Wait()
		require.Equal(t, 6, h.count()-before, "six registrations, six lines")
	})
}
