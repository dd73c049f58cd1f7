package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// newWakeSession starts a session of agent "tester" on src, with a short
// handover bound, and closes it when the test ends.
func newWakeSession(t *testing.T, src actions.Source, handover time.Duration) *Session {
	t.Helper()
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, ClaudePID: 4242, HandoverWithin: handover})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	return s
}

// armed is one registered waiter and its answer, once it comes.
type armed struct {
	cancel context.CancelFunc
	done   chan WakeAnswer
}

// arm registers a waiter in the background.
func arm(t *testing.T, s interface {
	WaitForWork(context.Context, WaitRequest) WakeAnswer
}, req WaitRequest) *armed {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	a := &armed{cancel: cancel, done: make(chan WakeAnswer, 1)}
	go func() { a.done <- s.WaitForWork(ctx, req) }()
	t.Cleanup(func() {
		cancel()
		<-a.done
	})
	return a
}

// answer waits for the waiter's answer (10 s at most).
func (a *armed) answer(t *testing.T) WakeAnswer {
	t.Helper()
	select {
	case r := <-a.done:
		a.done <- r // later calls (and the cleanup) see it too
		return r
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the waiter was not answered within 10 s")
		return WakeAnswer{}
	}
}

// next waits for the waiter's answer with no bound of its own: only inside
// a synctest bubble, where a waiter that is never answered fails the test
// as a deadlock.
func (a *armed) next() WakeAnswer {
	r := <-a.done
	a.done <- r
	return r
}

// quiet fails the test if the waiter has been answered; inside a synctest
// bubble, after synctest.Wait, "not yet" is exact.
func (a *armed) quiet(t *testing.T) {
	t.Helper()
	select {
	case r := <-a.done:
		a.done <- r
		t.Fatalf("the waiter was answered %+v; want no answer", r)
	default:
	}
}

// armedOnBoard waits until the board shows who's waiter armed: the waiter
// has registered and is looking.
func armedOnBoard(t *testing.T, b *board.Board, who identity.ID) {
	t.Helper()
	require.Eventually(t, func() bool { return waiterSince(t, b, who) != nil }, testtime.Bound(5*time.Second), 5*time.Millisecond,
		"bee agents shows the waiter armed")
}

// wakesFirstFor posts an action for anyone and requires the waiter's
// answer to be a wake for it: a wake it had been given before would be its
// answer instead. It proves, without waiting on the clock, that the waiter
// stayed quiet until now.
func (a *armed) wakesFirstFor(t *testing.T, b actions.Source, title string) {
	t.Helper()
	rec := post(t, b, "user:alice", "", title)
	resp := a.answer(t)
	require.True(t, resp.Wake, "%+v", resp)
	require.Contains(t, resp.Line, rec.ID)
}

func post(t *testing.T, b actions.Source, from identity.ID, to, title string) actions.Record {
	t.Helper()
	r, err := b.Post(t.Context(), actions.Agent(from), actions.Draft{To: to, Title: title, Body: "body of " + title})
	require.NoError(t, err)
	return r
}

func waiterSince(t *testing.T, b *board.Board, who identity.ID) *time.Time {
	t.Helper()
	ms, err := b.Members(t.Context())
	require.NoError(t, err)
	for _, m := range ms {
		if m.ID == who {
			return m.WaiterSince
		}
	}
	t.Fatalf("%s is not a live member", who)
	return nil
}

// A post for the session's agent wakes its waiter with a line naming the
// action; the action is claimed for the session before the wake, and the
// woken model's bee_wait_action returns that claim at once.
func TestWaitForWork_WakesAndHandsOver(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	cs := connectPending(t, Ready(s), nil, nil)
	me := s.Identity()

	a := arm(t, s, WaitRequest{PID: 1, HookEventName: "Stop"})
	armedOnBoard(t, b, me)
	rec := post(t, b, "user:alice", "tester", "Fix the flaky test")
	resp := a.answer(t)
	require.True(t, resp.Wake, "%+v", resp)
	require.Equal(t, `bee: action `+rec.ID+` "Fix the flaky test" from user:alice is waiting for `+string(me)+`; call bee_wait_action to take it.`, resp.Line)
	got, err := b.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Claimed, got.State)
	require.Equal(t, string(me), got.Holder, "claimed before the wake")
	require.Eventually(t, func() bool { return waiterSince(t, b, me) == nil }, testtime.Bound(5*time.Second), 5*time.Millisecond,
		"the waiter is gone once it woke the session")

	start := time.Now()
	page := structured[actions.Page](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 30}))
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "the handed-over claim comes back at once")
	require.Len(t, page.Records, 1)
	require.Equal(t, rec.ID, page.Records[0].ID)
	require.Equal(t, string(me), page.Records[0].Holder)
}

// Work posted before the waiter registers (between the last empty wait and
// the Stop) wakes it at once.
func TestWaitForWork_LooksFirst(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	rec := post(t, b, "user:alice", "", "already there")
	resp := arm(t, s, WaitRequest{}).answer(t)
	require.True(t, resp.Wake)
	require.Contains(t, resp.Line, rec.ID)
}

// A claim a wake made that no bee_wait_action takes goes back to the board
// HandoverWithin after the wake, to the fake-clock instant, and the same
// identity is not woken for that action again (the waiter's Notice skips
// it); a different action still wakes it.
func TestWaitForWork_OncePerActionAndHandoverBound(t *testing.T) {
	t.Parallel()
	for _, within := range []time.Duration{200 * time.Millisecond, DefaultHandoverWithin} {
		t.Run(within.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				another := make(chan struct{})
				var mu sync.Mutex
				var skips [][]string
				src := &actionstest.Source{
					NoticeFunc: func(ctx context.Context, who identity.ID, skip []string, _ time.Duration) (actions.Notice, bool, error) {
						mu.Lock()
						skips = append(skips, skip)
						mu.Unlock()
						id := "a-1"
						if slices.Contains(skip, id) {
							select {
							case <-another:
								id = "a-2"
							case <-ctx.Done():
								return actions.Notice{}, false, ctx.Err()
							}
						}
						return actions.Notice{Kind: actions.NoticeWork, Record: actions.Record{ID: id, Title: "t", From: "user:x", State: actions.Claimed, Holder: string(who)}}, true, nil
					},
				}
				s := newWakeSession(t, src, within)
				resp := arm(t, s, WaitRequest{}).next()
				require.True(t, resp.Wake)
				require.Contains(t, resp.Line, "a-1")

				time.Sleep(within - time.Nanosecond)
				synctest.Wait()
				require.Empty(t, src.Released(), "the claim waits for a bee_wait_action until the bound")
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				require.Equal(t, []string{"a-1"}, src.Released(), "the claim goes back at the bound")

				a := arm(t, s, WaitRequest{})
				synctest.Wait()
				a.quiet(t)
				mu.Lock()
				require.Equal(t, []string{"a-1"}, skips[len(skips)-1], "the waiter skips what it woke for")
				mu.Unlock()
				close(another)
				resp = a.next()
				require.True(t, resp.Wake)
				require.Contains(t, resp.Line, "a-2")
				require.NotContains(t, resp.Line, "a-1")
			})
		})
	}
}

// A newer waiter supersedes the older one, which is answered at once.
func TestWaitForWork_Supersede(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	first := arm(t, s, WaitRequest{PID: 1})
	armedOnBoard(t, b, s.Identity())
	second := arm(t, s, WaitRequest{PID: 2})
	require.Equal(t, WakeAnswer{Reason: ReasonSuperseded}, first.answer(t))
	rec := post(t, b, "user:alice", "", "for the newest")
	resp := second.answer(t)
	require.True(t, resp.Wake)
	require.Contains(t, resp.Line, rec.ID)
	require.Nil(t, waiterSinceEventually(t, b, s.Identity()))
}

// waiterSinceEventually waits until the waiter state settles to nil.
func waiterSinceEventually(t *testing.T, b *board.Board, who identity.ID) *time.Time {
	t.Helper()
	var at *time.Time
	require.Eventually(t, func() bool { at = waiterSince(t, b, who); return at == nil }, testtime.Bound(5*time.Second), 5*time.Millisecond)
	return at
}

// While a bee_wait_action is in flight the waiter is silent: the wait gets
// the action, the waiter stays armed.
func TestWaitForWork_SilentWhileAWaitRuns(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	cs := connectPending(t, Ready(s), nil, nil)
	a := arm(t, s, WaitRequest{})
	waited := make(chan actions.Page, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), waitParams(10))
		if err != nil || res.IsError {
			waited <- actions.Page{}
			return
		}
		waited <- structuredNoT[actions.Page](res)
	}()
	require.Eventually(t, func() bool {
		s.wk.mu.Lock()
		defer s.wk.mu.Unlock()
		return s.wk.current == 1
	}, testtime.Bound(5*time.Second), time.Millisecond)
	rec := post(t, b, "user:alice", "", "for the wait")
	var page actions.Page
	select {
	case page = <-waited:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the wait did not return")
	}
	require.Len(t, page.Records, 1)
	require.Equal(t, rec.ID, page.Records[0].ID)
	a.wakesFirstFor(t, b, "after the wait") // not for the one the wait took
}

// Of two idle sessions, one action for anyone wakes exactly one.
func TestWaitForWork_ClaimBeforeWake(t *testing.T) {
	b := openBoard(t)
	s1 := newWakeSession(t, b, time.Minute)
	s2 := newWakeSession(t, b, time.Minute)
	a1 := arm(t, s1, WaitRequest{})
	a2 := arm(t, s2, WaitRequest{})
	armedOnBoard(t, b, s1.Identity())
	armedOnBoard(t, b, s2.Identity())
	rec := post(t, b, "user:alice", "", "for one of you")
	var woke, quiet *armed
	select {
	case r := <-a1.done:
		a1.done <- r
		woke, quiet = a1, a2
	case r := <-a2.done:
		a2.done <- r
		woke, quiet = a2, a1
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("nobody woke")
	}
	require.True(t, woke.answer(t).Wake)
	require.Contains(t, woke.answer(t).Line, rec.ID)
	quiet.wakesFirstFor(t, b, "for the other") // not for the one its peer claimed
}

// /clear while armed: the old identity's watch ends and the waiter carries
// on under the new identity, which the next wake names.
func TestWaitForWork_RetireCarriesOn(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	old := s.Identity()
	a := arm(t, s, WaitRequest{})
	armedOnBoard(t, b, old)
	resp, err := s.Retire(t.Context(), RetireRequest{SessionID: "s-2"})
	require.NoError(t, err)
	require.Equal(t, old, resp.Retired)
	armedOnBoard(t, b, s.Identity()) // under the new identity
	rec := post(t, b, "user:alice", string(s.Identity()), "for the new one")
	w := a.answer(t)
	require.True(t, w.Wake)
	require.Contains(t, w.Line, rec.ID)
	require.Contains(t, w.Line, "waiting for "+resp.Current)
}

// The poster hears of its action's end.
func TestWaitForWork_Outcome(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	other := identity.ID("agent:other#0000000b")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: other}))
	rec := post(t, b, s.Identity(), "other", "please do it")
	p, err := b.Next(t.Context(), other, "", time.Second)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	a := arm(t, s, WaitRequest{})
	armedOnBoard(t, b, s.Identity())
	_, err = b.Finish(t.Context(), other, rec.ID, "it is\ndone")
	require.NoError(t, err)
	resp := a.answer(t)
	require.True(t, resp.Wake)
	require.Equal(t, `bee: action `+rec.ID+` you posted ("please do it") is done by `+string(other)+`: it is done`, resp.Line)
}

// Depart answers a waiter "shutting down".
func TestWaitForWork_DepartEndsIt(t *testing.T) {
	b := openBoard(t)
	s := newWakeSession(t, b, time.Minute)
	a := arm(t, s, WaitRequest{})
	armedOnBoard(t, b, s.Identity())
	require.NoError(t, s.Depart(t.Context()))
	require.Equal(t, WakeAnswer{Reason: ReasonShuttingDown}, a.answer(t))
}

// A waiter that asked to be re-armed gets the re-arm wake when that time
// comes, and not before.
func TestWaitForWork_Rearm(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := newWakeSession(t, &actionstest.Source{}, time.Minute)
		a := arm(t, s, WaitRequest{Rearm: 24 * time.Hour})
		time.Sleep(24*time.Hour - time.Nanosecond)
		synctest.Wait()
		a.quiet(t)
		time.Sleep(time.Nanosecond)
		require.Equal(t, WakeAnswer{Wake: true, Line: RearmLine}, a.next())
	})
}

// News a waiter found as it went away is kept: the next waiter hears it.
func TestWaitForWork_KeepsNewsForTheNextWaiter(t *testing.T) {
	claimed := make(chan struct{})
	var calls atomic.Int32
	src := &actionstest.Source{
		NoticeFunc: func(ctx context.Context, who identity.ID, skip []string, _ time.Duration) (actions.Notice, bool, error) {
			if calls.Add(1) == 1 {
				// The first waiter's news arrives just as it goes away.
				close(claimed)
				<-ctx.Done()
				return actions.Notice{Kind: actions.NoticeWork, Record: actions.Record{ID: "a-1", Title: "t", From: "user:x", State: actions.Claimed, Holder: string(who)}}, true, nil
			}
			<-ctx.Done()
			return actions.Notice{}, false, ctx.Err()
		},
	}
	s := newWakeSession(t, src, time.Minute)
	first := arm(t, s, WaitRequest{})
	<-claimed
	first.cancel()
	require.Equal(t, ReasonGone, first.answer(t).Reason)
	resp := arm(t, s, WaitRequest{}).answer(t)
	require.True(t, resp.Wake)
	require.Contains(t, resp.Line, "a-1")
}

// When the source says the current identity has departed (its lease ran
// out while the process was stopped), the session carries on under a new
// identity instead of refusing every call: both the waiter and a wait.
func TestSession_ReplacesADepartedIdentity(t *testing.T) {
	var mu sync.Mutex
	gone := map[identity.ID]bool{}
	departed := func(who identity.ID) bool {
		mu.Lock()
		defer mu.Unlock()
		if len(gone) == 0 {
			gone[who] = true // the first identity the source sees has departed
		}
		return gone[who]
	}
	src := &actionstest.Source{
		NoticeFunc: func(ctx context.Context, who identity.ID, _ []string, _ time.Duration) (actions.Notice, bool, error) {
			if departed(who) {
				return actions.Notice{}, false, actions.ErrDeparted
			}
			return actions.Notice{Kind: actions.NoticeWork, Record: actions.Record{ID: "a-9", Title: "t", From: "user:x", State: actions.Claimed, Holder: string(who)}}, true, nil
		},
		NextFunc: func(ctx context.Context, who identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
			if departed(who) {
				return actions.Page{}, actions.ErrDeparted
			}
			return actions.Page{Records: []actions.Record{}, Cursor: "c"}, nil
		},
	}
	s := newWakeSession(t, src, time.Minute)
	first := s.Identity()
	resp := arm(t, s, WaitRequest{}).answer(t)
	require.True(t, resp.Wake, "%+v", resp)
	second := s.Identity()
	require.NotEqual(t, first, second)
	require.Contains(t, resp.Line, string(second))
	joined := src.Joined()
	require.Equal(t, second, joined[len(joined)-1].ID)

	// A wait whose identity the source reports departed carries on too.
	s2 := newWakeSession(t, src, time.Minute)
	mu.Lock()
	gone[s2.Identity()] = true
	mu.Unlock()
	cs := connectPending(t, Ready(s2), nil, nil)
	before := s2.Identity()
	res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
	require.False(t, res.IsError, text(res))
	require.NotEqual(t, before, s2.Identity())
}

func TestWakeLine(t *testing.T) {
	who := identity.ID("agent:reviewer#1a2b3c4d")
	rec := actions.Record{ID: "a-7", Title: "Fix the\nflaky\x1b[31m test", From: "user:alice", EndedBy: "agent:dev#00000001"}
	require.Equal(t, `bee: action a-7 "Fix the flaky [31m test" from user:alice is waiting for agent:reviewer#1a2b3c4d; call bee_wait_action to take it.`,
		WakeLine(who, actions.Notice{Kind: actions.NoticeWork, Record: rec}))

	rec.Title = "t"
	rec.State, rec.Reason = actions.Failed, "no disk"
	require.Equal(t, `bee: action a-7 you posted ("t") failed, said agent:dev#00000001: no disk`,
		WakeLine(who, actions.Notice{Kind: actions.NoticeOutcome, Record: rec}))
	rec.State, rec.EndedBy, rec.Reason = actions.Cancelled, "user:bob", "not needed"
	require.Equal(t, `bee: action a-7 you posted ("t") was cancelled by user:bob: not needed`,
		WakeLine(who, actions.Notice{Kind: actions.NoticeOutcome, Record: rec}))
	rec.Reason = ""
	require.Equal(t, `bee: action a-7 you posted ("t") was cancelled by user:bob`,
		WakeLine(who, actions.Notice{Kind: actions.NoticeOutcome, Record: rec}))

	rec.State, rec.EndedBy, rec.Result = actions.Done, "agent:dev#00000001", strings.Repeat("é", 400)+"\u2028end"
	line := WakeLine(who, actions.Notice{Kind: actions.NoticeOutcome, Record: rec})
	require.LessOrEqual(t, len(line), MaxWakeLine)
	require.True(t, strings.HasSuffix(line, "é…"), line)
	require.NotContains(t, line, "\n")

	rec.Title = strings.Repeat("x", 500)
	line = WakeLine(who, actions.Notice{Kind: actions.NoticeWork, Record: rec})
	require.LessOrEqual(t, len(line), MaxWakeLine)
	require.Contains(t, line, "call bee_wait_action to take it.", "a long title does not push out what to do")
}

func TestPending_WaitForWork_SetupFailed(t *testing.T) {
	p := Start(t.Context(), Config{Agent: "tester"}, func() (actions.Source, error) { return nil, errors.New("board is damaged") })
	resp := p.WaitForWork(t.Context(), WaitRequest{})
	require.Equal(t, "bee cannot serve actions: board is damaged", resp.Reason)
	require.False(t, resp.Wake)
}

func waitParams(secs int) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: ToolWait, Arguments: map[string]any{"timeoutSeconds": secs}}
}

// structuredNoT decodes a result's structured content from any goroutine.
func structuredNoT[T any](res *mcp.CallToolResult) T {
	var v T
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}
