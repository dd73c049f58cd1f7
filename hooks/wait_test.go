package hooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

// waitFixture is a run directory and a fake bridge whose answers the test
// scripts, one per registration.
type waitFixture struct {
	f *fixture

	mu      sync.Mutex
	reqs    []clearctl.WaitRequest
	tokens  []string
	answers []func(ctx context.Context) (clearctl.WaitResponse, error)
}

func newWaitFixture(t *testing.T) *waitFixture {
	return &waitFixture{f: newFixture(t)}
}

// answer scripts the bridge's next answers.
func (w *waitFixture) answer(a ...func(ctx context.Context) (clearctl.WaitResponse, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answers = append(w.answers, a...)
}

func wakeWith(line string) func(context.Context) (clearctl.WaitResponse, error) {
	return func(context.Context) (clearctl.WaitResponse, error) {
		return clearctl.WaitResponse{Wake: true, Line: line}, nil
	}
}

func noWake(reason string) func(context.Context) (clearctl.WaitResponse, error) {
	return func(context.Context) (clearctl.WaitResponse, error) {
		return clearctl.WaitResponse{Reason: reason}, nil
	}
}

func fails(err error) func(context.Context) (clearctl.WaitResponse, error) {
	return func(context.Context) (clearctl.WaitResponse, error) { return clearctl.WaitResponse{}, err }
}

func holds(ctx context.Context) (clearctl.WaitResponse, error) {
	<-ctx.Done()
	return clearctl.WaitResponse{}, ctx.Err()
}

func (w *waitFixture) config() WaitConfig {
	return WaitConfig{
		Attended: true,
		Bridge: Bridge{
			RunDir:    w.f.dir,
			ClaudePID: testClaudePID,
			Alive:     func(int) bool { return true },
			Listener:  func(int, int) error { return nil },
		},
		BridgeWithin: 300 * time.Millisecond,
		PID:          777,
		WaitForWork: func(ctx context.Context, port int, token string, req clearctl.WaitRequest) (clearctl.WaitResponse, error) {
			w.mu.Lock()
			w.reqs = append(w.reqs, req)
			w.tokens = append(w.tokens, token)
			var a func(context.Context) (clearctl.WaitResponse, error)
			if len(w.answers) > 0 {
				a, w.answers = w.answers[0], w.answers[1:]
			}
			w.mu.Unlock()
			if a == nil {
				return holds(ctx)
			}
			return a(ctx)
		},
	}
}

func (w *waitFixture) registrations() ([]clearctl.WaitRequest, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]clearctl.WaitRequest(nil), w.reqs...), append([]string(nil), w.tokens...)
}

const stopInput = `{"session_id":"s-1","transcript_path":"/t/s-1.jsonl","cwd":"/w","hook_event_name":"Stop","stop_hook_active":true}`

func TestWait_NotAttended(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	cfg := w.config()
	cfg.Attended = false
	require.Equal(t, WaitResult{}, Wait(t.Context(), cfg, failReader{t}))
	reqs, _ := w.registrations()
	require.Empty(t, reqs)
}

// failReader fails the test if read.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("stdin must not be read")
	return 0, errors.New("stdin must not be read")
}

// The bridge's wake is the only way to ExitWake; stop_hook_active (true
// after every woken turn) does not stop the waiter.
func TestWait_Wakes(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	w.answer(wakeWith("bee: action a-7 \"Fix it\" from user:alice is waiting for agent:x#00000001; call bee_wait_action to take it."))
	res := Wait(t.Context(), w.config(), strings.NewReader(stopInput))
	require.Equal(t, ExitWake, res.Code)
	require.Equal(t, "bee: action a-7 \"Fix it\" from user:alice is waiting for agent:x#00000001; call bee_wait_action to take it.", res.Line)
	reqs, tokens := w.registrations()
	require.Len(t, reqs, 1)
	require.Equal(t, 777, reqs[0].PID)
	require.Equal(t, "s-1", reqs[0].SessionID)
	require.Equal(t, "Stop", reqs[0].HookEventName)
	require.InDelta(t, DefaultRearmAfter.Seconds(), reqs[0].RearmSeconds, 2)
	require.Equal(t, w.f.entry.Token, tokens[0])
}

func TestWait_NeverWakesOnAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		input  string
		answer func(context.Context) (clearctl.WaitResponse, error)
		want   string
	}{
		{"superseded", stopInput, noWake(clearctl.ReasonSuperseded), "bee-hook: waiter ends without a wake: superseded"},
		{"bridge failed", stopInput, fails(&clearctl.StatusError{Code: 500, Body: "x", Op: "wait for work"}), "bee-hook: waiter ends (bridge pid 5151, port 40123): wait for work: bridge answered 500"},
		{"too old a bridge", stopInput, fails(&clearctl.StatusError{Code: 404, Op: "wait for work"}), "bee-hook: waiter ends (bridge pid 5151, port 40123): wait for work: bridge answered 404"},
		{"wake without a line", stopInput, wakeWith(" \n "), "bee-hook: the bridge asked for a wake without a line; not waking"},
		{"panic", stopInput, func(context.Context) (clearctl.WaitResponse, error) { panic("boom") }, "bee-hook: internal error: boom"},
		{"bad input", `{"session_id":`, nil, "bee-hook: cannot read the hook input: unexpected end of JSON input"},
		{"other event", `{"hook_event_name":"PreToolUse"}`, nil, "bee-hook: ignoring a PreToolUse input; the waiter runs on Stop and SessionStart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitFixture(t)
			if tc.answer != nil {
				w.answer(tc.answer)
			}
			res := Wait(t.Context(), w.config(), strings.NewReader(tc.input))
			require.Equal(t, 0, res.Code)
			require.True(t, strings.HasPrefix(res.Line, tc.want), "line %q", res.Line)
			w.f.requireLine(t, res.Line)
		})
	}
}

// A token in an error never reaches the line.
func TestWait_TokenScrubbed(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	w.answer(fails(fmt.Errorf("echo %s", w.f.entry.Token)))
	res := Wait(t.Context(), w.config(), strings.NewReader(stopInput))
	require.Equal(t, 0, res.Code)
	w.f.requireLine(t, res.Line)
	require.Contains(t, res.Line, "[token]")
}

// At SessionStart the waiter can start before the bridge has written its run
// file: it waits for it, within its bound.
func TestWait_WaitsForTheRunFile(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	require.NoError(t, runfileRemove(w.f))
	w.answer(wakeWith("bee: woken"))
	cfg := w.config()
	cfg.BridgeWithin = testtime.Bound(10 * time.Second)
	done := make(chan WaitResult, 1)
	go func() {
		done <- Wait(t.Context(), cfg, strings.NewReader(`{"hook_event_name":"SessionStart","source":"startup"}`))
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is polling by now; the bridge registers late
	require.NoError(t, runfile.Write(w.f.dir, testClaudePID, w.f.entry))
	select {
	case res := <-done:
		require.Equal(t, WaitResult{Code: ExitWake, Line: "bee: woken"}, res)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the waiter did not find the late run file")
	}
}

func runfileRemove(f *fixture) error {
	_, err := runfile.Remove(f.dir, testClaudePID, f.entry.Token)
	return err
}

func TestWait_NoBridge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(w *waitFixture, cfg *WaitConfig)
		want  string
	}{
		{"no run file", func(w *waitFixture, _ *WaitConfig) { require.NoError(t, runfileRemove(w.f)) },
			"bee-hook: no bridge registered for claude pid 4242 in "},
		{"stale run file", func(w *waitFixture, cfg *WaitConfig) {
			cfg.Alive = func(pid int) bool { return pid != testBridgePID }
		}, "bee-hook: removed the stale run file of dead bridge pid 5151 (claude pid 4242), and no live bridge registered after 300ms"},
		{"claude gone", func(w *waitFixture, cfg *WaitConfig) {
			cfg.Alive = func(pid int) bool { return pid != testClaudePID }
			cfg.BridgeWithin = time.Hour // must not matter
		}, "bee-hook: claude pid 4242 is gone; no session to wake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitFixture(t)
			cfg := w.config()
			tc.setup(w, &cfg)
			start := time.Now()
			res := Wait(t.Context(), cfg, strings.NewReader(stopInput))
			require.Less(t, time.Since(start), testtime.Bound(5*time.Second))
			require.Equal(t, 0, res.Code)
			require.True(t, strings.HasPrefix(res.Line, tc.want), "line %q", res.Line)
			reqs, _ := w.registrations()
			require.Empty(t, reqs)
			if tc.name == "stale run file" {
				_, err := runfile.Read(w.f.dir, testClaudePID)
				require.ErrorIs(t, err, fs.ErrNotExist, "the dead bridge's run file is gone")
			}
		})
	}
}

// A bridge that goes away (a /mcp reconnect) is followed: the waiter finds
// the new bridge's run file and registers there; the old token is not used
// again.
func TestWait_FollowsANewBridge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gone func(context.Context) (clearctl.WaitResponse, error)
	}{
		{"shutting down", noWake(clearctl.ReasonShuttingDown)},
		{"connection lost", fails(fmt.Errorf("%w: EOF", clearctl.ErrConnectionLost))},
		{"not listening", fails(fmt.Errorf("%w: refused", clearctl.ErrNotListening))},
		{"token changed", fails(&clearctl.StatusError{Code: 401, Op: "wait for work"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitFixture(t)
			tok, err := runfile.NewToken()
			require.NoError(t, err)
			next := runfile.Entry{Port: 40124, Token: tok, PID: 6161}
			w.answer(func(ctx context.Context) (clearctl.WaitResponse, error) {
				// The new bridge registers as the old one goes.
				require.NoError(t, runfile.Write(w.f.dir, testClaudePID, next))
				return tc.gone(ctx)
			}, wakeWith("bee: from the new bridge"))
			cfg := w.config()
			cfg.BridgeWithin = testtime.Bound(10 * time.Second)
			res := Wait(t.Context(), cfg, strings.NewReader(stopInput))
			require.Equal(t, WaitResult{Code: ExitWake, Line: "bee: from the new bridge"}, res)
			_, tokens := w.registrations()
			require.Equal(t, []string{w.f.entry.Token, next.Token}, tokens)
		})
	}
}

// A bridge that goes away with no successor: the waiter gives up within its
// bound, without a wake.
func TestWait_BridgeGoneForGood(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	w.answer(noWake(clearctl.ReasonShuttingDown))
	res := Wait(t.Context(), w.config(), strings.NewReader(stopInput))
	require.Equal(t, 0, res.Code)
	require.Equal(t, "bee-hook: the bridge of claude pid 4242 went away and no new one registered after 300ms; this session is not woken until its next turn ends", res.Line)
}

// The waiter ends at once when its context does (SIGTERM), whether it is
// long-polling or looking for a run file.
func TestWait_StopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(w *waitFixture, cfg *WaitConfig)
	}{
		{"long-polling", func(*waitFixture, *WaitConfig) {}},
		{"looking for the bridge", func(w *waitFixture, cfg *WaitConfig) {
			require.NoError(t, runfileRemove(w.f))
			cfg.BridgeWithin = time.Hour
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitFixture(t)
			cfg := w.config()
			tc.setup(w, &cfg)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan WaitResult, 1)
			go func() { done <- Wait(ctx, cfg, strings.NewReader(stopInput)) }()
			time.Sleep(100 * time.Millisecond) // let it get going; the assertion below does not depend on it
			cancel()
			select {
			case res := <-done:
				require.Equal(t, 0, res.Code)
				require.True(t, strings.HasPrefix(res.Line, "bee-hook: waiter stopped"), res.Line)
			case <-time.After(testtime.Bound(5 * time.Second)):
				t.Fatal("the waiter did not stop when its context ended")
			}
		})
	}
}

// With no claude process found, the waiter ends without a wake.
func TestWait_NoClaude(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	cfg := w.config()
	cfg.ClaudePID = 0
	cfg.FindClaude = func(context.Context) (int, bool, error) { return 0, false, nil }
	res := Wait(t.Context(), cfg, strings.NewReader(stopInput))
	require.Equal(t, WaitResult{Line: "bee-hook: no claude process above this hook; no session to wake"}, res)
	reqs, _ := w.registrations()
	require.Empty(t, reqs)
}

// A run file whose port is not its bridge's own: the token is not sent
// there; the waiter ends without a wake when nothing better comes.
func TestWait_PortNotTheBridges(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	cfg := w.config()
	cfg.Listener = func(pid, port int) error { return errors.New("the port is not the process's") }
	res := Wait(t.Context(), cfg, strings.NewReader(stopInput))
	require.Equal(t, 0, res.Code)
	require.True(t, strings.HasPrefix(res.Line, "bee-hook: not sending the token to port 40123"), res.Line)
	reqs, _ := w.registrations()
	require.Empty(t, reqs, "no token sent")
}

// The re-arm time counts from the start, across bridges.
func TestWait_RearmCountsFromTheStart(t *testing.T) {
	t.Parallel()
	w := newWaitFixture(t)
	w.answer(wakeWith("bee: x"))
	cfg := w.config()
	cfg.RearmAfter = 90 * time.Second
	Wait(t.Context(), cfg, strings.NewReader(stopInput))
	reqs, _ := w.registrations()
	require.Len(t, reqs, 1)
	require.InDelta(t, 90, reqs[0].RearmSeconds, 1)
}
