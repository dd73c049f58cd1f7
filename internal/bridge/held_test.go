package bridge

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
)

// heldBoard is a fake board of one action, a-1: a wait claims it once
// post is closed, the waiter's Notice never finds news (unless notice is
// set), and the board shows a-1 held by whoever claimed it until a release
// or a finish.
type heldBoard struct {
	*actionstest.Source
	post chan struct{}

	mu     sync.Mutex
	holder identity.ID
	state  actions.State
}

func newHeldBoard() *heldBoard {
	b := &heldBoard{post: make(chan struct{}), state: actions.Open}
	b.Source = &actionstest.Source{
		NextFunc: func(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case <-b.post:
				if rec, ok := b.claim(who); ok {
					return actions.Page{Records: []actions.Record{rec}, Cursor: "c1"}, nil
				}
				<-t.C
			case <-t.C:
			case <-ctx.Done():
				return actions.Page{}, ctx.Err()
			}
			return actions.Page{Records: []actions.Record{}, Cursor: after}, nil
		},
		NoticeFunc: func(ctx context.Context, _ identity.ID, _ []string, _ time.Duration) (actions.Notice, bool, error) {
			<-ctx.Done()
			return actions.Notice{}, false, ctx.Err()
		},
		GetFunc: func(context.Context, string) (actions.Record, error) { return b.record(), nil },
		ReleaseFunc: func(_ context.Context, who identity.ID, _ string) (actions.Record, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.state != actions.Claimed || b.holder != who {
				return actions.Record{}, actions.ErrNotHeld
			}
			b.state, b.holder = actions.Open, ""
			return actions.Record{ID: "a-1", State: actions.Open}, nil
		},
		FinishFunc: func(_ context.Context, who identity.ID, _, _ string) (actions.Record, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.state = actions.Done
			return actions.Record{ID: "a-1", State: actions.Done, Holder: string(who), Title: "t", From: "user:alice", PostedAt: time.Now()}, nil
		},
	}
	return b
}

func (b *heldBoard) claim(who identity.ID) (actions.Record, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != actions.Open {
		return actions.Record{}, false
	}
	b.state, b.holder = actions.Claimed, who
	return b.recordLocked(), true
}

func (b *heldBoard) record() actions.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recordLocked()
}

func (b *heldBoard) recordLocked() actions.Record {
	return actions.Record{ID: "a-1", Title: "Fix the flaky test", From: "user:alice", State: b.state, Holder: string(b.holder), PostedAt: time.Now()}
}

// heldSession serves a session on a heldBoard, with a client connected.
func heldSession(t *testing.T) (*heldBoard, *Session, *mcp.ClientSession) {
	t.Helper()
	b := newHeldBoard()
	s := newWakeSession(t, b, time.Minute)
	return b, s, connectPending(t, Ready(s), nil, nil)
}

// abandonedWait starts a wait whose client gives up on it without a
// cancel: its answer is read by nobody.
func abandonedWait(cs *mcp.ClientSession) {
	go func() { _, _ = cs.CallTool(context.Background(), waitParams(30)) }()
}

// A wait the client abandoned (its idle timeout ended the turn without a
// cancel) claims the next action for nobody. The waiter that registers at
// the turn's end is not silenced by it, and RemindAfter after the claim,
// nothing having finished, failed or released it, the session is woken
// about it; the woken model's wait gets it at once.
func TestRemind_AbandonedWaitWakesTheSession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, s, cs := heldSession(t)
		abandonedWait(cs)
		synctest.Wait()
		a := arm(t, s, WaitRequest{HookEventName: "Stop"}) // the turn ended
		synctest.Wait()
		close(b.post) // the abandoned wait claims a-1
		synctest.Wait()
		require.Equal(t, actions.Claimed, b.record().State)

		time.Sleep(DefaultRemindAfter - time.Nanosecond)
		synctest.Wait()
		a.quiet(t)
		time.Sleep(time.Nanosecond)
		resp := a.next()
		require.True(t, resp.Wake)
		require.Equal(t, ReminderLine(b.record()), resp.Line)
		require.Contains(t, resp.Line, "a-1")
		require.Contains(t, resp.Line, "call "+ToolWait)

		start := time.Now()
		page := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 30}))
		require.Zero(t, time.Since(start), "the woken model's wait gets the claim at once")
		require.Len(t, page.Records, 1)
		require.Equal(t, "a-1", page.Records[0].ID)
		require.Empty(t, b.Released())
	})
}

// A reminded claim that no wait takes within HandoverWithin goes back to
// the board; with no waiter armed to wake the session, it goes back all
// the same: no claim stays held silently.
func TestRemind_GoesBackToTheBoard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		waiter bool // armed when the reminder comes
	}{{"woken", true}, {"no waiter", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, s, cs := heldSession(t)
				abandonedWait(cs)
				synctest.Wait()
				a := arm(t, s, WaitRequest{HookEventName: "Stop"})
				synctest.Wait()
				if !tc.waiter {
					a.cancel() // the hook was killed
					require.Equal(t, ReasonGone, a.next().Reason)
				}
				claimed := time.Now()
				close(b.post)
				synctest.Wait()
				if tc.waiter {
					time.Sleep(DefaultRemindAfter)
					require.True(t, a.next().Wake)
				}
				time.Sleep(time.Until(claimed.Add(DefaultRemindAfter+time.Minute)) - time.Nanosecond)
				synctest.Wait()
				require.Empty(t, b.Released(), "held until the handover bound")
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				require.Equal(t, []string{"a-1"}, b.Released())
				require.Equal(t, actions.Open, b.record().State)
			})
		})
	}
}

// A claim the model acts on (a finish names it) is never reminded of; nor
// is one whose session's turn has not ended.
func TestRemind_NotForAClaimFollowedUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, s, cs := heldSession(t)
		close(b.post)
		page := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 30}))
		require.Len(t, page.Records, 1)
		time.Sleep(time.Hour) // a long piece of work, in one turn
		synctest.Wait()
		a := arm(t, s, WaitRequest{HookEventName: "Stop"}) // the turn ends with it finished
		structured[actionOut](t, call(t, cs, ToolFinish, map[string]any{"id": "a-1", "result": "fixed"}))
		time.Sleep(time.Hour)
		synctest.Wait()
		a.quiet(t)
		require.Empty(t, b.Released())
	})
}

// A session is reminded of a claim once: taken back by a wait after the
// reminder, it is held knowingly, and a later turn's end leaves it be.
func TestRemind_Once(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, s, cs := heldSession(t)
		close(b.post)
		structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 30}))
		a := arm(t, s, WaitRequest{HookEventName: "Stop"}) // ended without acting on it
		time.Sleep(DefaultRemindAfter)
		require.True(t, a.next().Wake)
		page := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 30}))
		require.Len(t, page.Records, 1, "taken back")
		a = arm(t, s, WaitRequest{HookEventName: "Stop"})
		time.Sleep(time.Hour)
		synctest.Wait()
		a.quiet(t)
		require.Empty(t, b.Released())
		require.Equal(t, actions.Claimed, b.record().State)
	})
}

// A waiter is silenced only by waits begun since it registered: a wait
// begun before (the turn that made it has ended; it may be abandoned)
// does not keep it from waking the session at once.
func TestWaitForWork_NotSilencedByAWaitBegunBefore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		news := make(chan struct{})
		src := &actionstest.Source{
			NoticeFunc: func(ctx context.Context, who identity.ID, _ []string, _ time.Duration) (actions.Notice, bool, error) {
				select {
				case <-news:
					return actions.Notice{Kind: actions.NoticeWork, Record: actions.Record{ID: "a-2", Title: "t", From: "user:x", State: actions.Claimed, Holder: string(who)}}, true, nil
				case <-ctx.Done():
					return actions.Notice{}, false, ctx.Err()
				}
			},
		}
		s := newWakeSession(t, src, time.Minute)
		cs := connectPending(t, Ready(s), nil, nil)
		abandonedWait(cs)
		synctest.Wait()
		a := arm(t, s, WaitRequest{HookEventName: "Stop"})
		synctest.Wait()
		posted := time.Now()
		close(news)
		resp := a.next()
		require.True(t, resp.Wake)
		require.Contains(t, resp.Line, "a-2")
		require.Zero(t, time.Since(posted), "woken at once, not when the older wait ends")
	})
}

// A reminder is one line within MaxWakeLine, and however long the title
// and the poster, it ends with what to do.
func TestReminderLine(t *testing.T) {
	t.Parallel()
	r := actions.Record{ID: "a-1234567", Title: "Fix the\nflaky test", From: "user:alice"}
	require.Equal(t, `bee: action a-1234567 "Fix the flaky test" from user:alice is still yours, unfinished, since your turn ended; call bee_wait_action to get it back, then do it or release it.`,
		ReminderLine(r))
	r.Title, r.From = strings.Repeat("x", 500), "user:"+strings.Repeat("p", 64)
	line := ReminderLine(r)
	require.LessOrEqual(t, len(line), MaxWakeLine)
	require.True(t, strings.HasSuffix(line, "call bee_wait_action to get it back, then do it or release it."), line)
}
