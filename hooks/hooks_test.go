package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/runfile"
)

const (
	testClaudePID = 4242
	testBridgePID = 5151
)

// fixture is a run directory holding one run file, and fakes that record
// what Run asks of them.
type fixture struct {
	dir   string
	entry runfile.Entry

	mu      sync.Mutex
	retires []retireCall
	alives  []int
}

type retireCall struct {
	port  int
	token string
	req   clearctl.RetireRequest
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	f := &fixture{dir: t.TempDir(), entry: runfile.Entry{Port: 40123, Token: tok, PID: testBridgePID}}
	require.NoError(t, runfile.Write(f.dir, testClaudePID, f.entry))
	return f
}

// config returns a Config aimed at the fixture, whose Retire answers with
// retire and whose bridge is alive when alive says so.
func (f *fixture) config(alive bool, retire func(req clearctl.RetireRequest) (clearctl.RetireResponse, error)) Config {
	return Config{
		Bridge: Bridge{
			RunDir:    f.dir,
			ClaudePID: testClaudePID,
			Alive: func(pid int) bool {
				f.mu.Lock()
				f.alives = append(f.alives, pid)
				f.mu.Unlock()
				return alive
			},
			Listener: func(int, int) error { return nil },
		},
		Timeout: testtime.Bound(5 * time.Second),
		Retire: func(_ context.Context, port int, token string, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
			f.mu.Lock()
			f.retires = append(f.retires, retireCall{port, token, req})
			f.mu.Unlock()
			return retire(req)
		},
	}
}

func (f *fixture) calls() ([]retireCall, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retires, f.alives
}

func retired(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
	return clearctl.RetireResponse{Retired: "agent:x#aaaaaaaa", Current: "agent:x#bbbbbbbb"}, nil
}

func mustNotRetire(t *testing.T) func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
	return func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		t.Error("Retire must not be called")
		return clearctl.RetireResponse{}, errors.New("unexpected")
	}
}

// requireLine checks outcome is one line that starts "bee-hook: " and does
// not hold the fixture's token.
func (f *fixture) requireLine(t *testing.T, outcome string) {
	t.Helper()
	require.True(t, strings.HasPrefix(outcome, "bee-hook: "), "outcome %q", outcome)
	require.NotContains(t, outcome, "\n")
	require.NotContains(t, outcome, f.entry.Token)
}

const clearInput = `{"session_id":"new-session","transcript_path":"/t/new-session.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`

func TestConfigJSON(t *testing.T) {
	t.Parallel()
	onDisk, err := os.ReadFile("hooks.json")
	require.NoError(t, err)
	require.Equal(t, string(onDisk), ConfigJSON())
	require.Equal(t, ConfigFor(PluginCommand), ConfigJSON(), "hooks.json is ConfigFor(PluginCommand); regenerate it")

	type command struct {
		Type          string `json:"type"`
		Command       string `json:"command"`
		AsyncRewake   bool   `json:"asyncRewake"`
		Timeout       int    `json:"timeout"`
		RewakeSummary string `json:"rewakeSummary"`
		RewakeMessage string `json:"rewakeMessage"`
	}
	type matcher struct {
		Matcher string    `json:"matcher"`
		Hooks   []command `json:"hooks"`
	}
	var cfg struct {
		Hooks map[string][]matcher `json:"hooks"`
	}
	dec := json.NewDecoder(strings.NewReader(ConfigFor("'/opt/my bee/bee-hook'")))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&cfg))
	waiter := matcher{Hooks: []command{{
		Type: "command", Command: "'/opt/my bee/bee-hook' --wait-for-work", AsyncRewake: true, Timeout: 86400,
		RewakeSummary: RewakeSummary, RewakeMessage: RewakeMessage,
	}}}
	require.Equal(t, map[string][]matcher{
		"SessionStart": {{Matcher: "clear", Hooks: []command{{Type: "command", Command: "'/opt/my bee/bee-hook'"}}}, waiter},
		"Stop":         {waiter},
		"PreToolUse": {{Matcher: "Edit|Write|MultiEdit|NotebookEdit", Hooks: []command{{
			Type: "command", Command: "'/opt/my bee/bee-hook' --guard", Timeout: 10,
		}}}},
	}, cfg.Hooks)
}

func TestRun_NotClear(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, input string }{
		{"startup", `{"session_id":"s","transcript_path":"/t/s.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup","model":"m"}`},
		{"resume", `{"hook_event_name":"SessionStart","source":"resume"}`},
		{"compact", `{"source":"compact"}`},
		{"no source", `{}`},
		{"null", `null`},
		{"Clear is not clear", `{"source":"Clear"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := Run(t.Context(), f.config(true, mustNotRetire(t)), strings.NewReader(tc.input))
			require.Empty(t, out)
			retires, alives := f.calls()
			require.Empty(t, retires)
			require.Empty(t, alives)
		})
	}
}

func TestRun_BadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, input, want string }{
		{"not json", "source=clear\n", "bee-hook: cannot read SessionStart input: invalid character"},
		{"empty", "", "bee-hook: cannot read SessionStart input: unexpected end of JSON input"},
		{"array", `["clear"]`, "bee-hook: cannot read SessionStart input: json: cannot unmarshal array"},
		{"source not a string", `{"source":1}`, "bee-hook: cannot read SessionStart input: json: cannot unmarshal number"},
		{"two objects", clearInput + clearInput, "bee-hook: cannot read SessionStart input: invalid character '{' after top-level value"},
		{"newline in the bad byte", "{\n\"source\":\"clear\"\n\n}}", "bee-hook: cannot read SessionStart input: invalid character '}' after top-level value"},
		{"other event", `{"hook_event_name":"Stop","source":"clear"}`, `bee-hook: ignoring a Stop input; bee-hook is a SessionStart hook (matcher "clear")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := Run(t.Context(), f.config(true, mustNotRetire(t)), strings.NewReader(tc.input))
			f.requireLine(t, out)
			require.True(t, strings.HasPrefix(out, tc.want), "outcome %q", out)
		})
	}
}

func TestRun_InputSize(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true, retired)
	cfg.MaxInput = int64(len(clearInput))

	out := Run(t.Context(), cfg, strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: retired agent:x#aaaaaaaa -> agent:x#bbbbbbbb", out, "exactly MaxInput bytes is fine")

	out = Run(t.Context(), cfg, strings.NewReader(clearInput+" "))
	require.Equal(t, fmt.Sprintf("bee-hook: cannot read SessionStart input: larger than %d bytes", len(clearInput)), out)
	retires, _ := f.calls()
	require.Len(t, retires, 1)

	cfg.MaxInput = 0 // the default
	huge := `{"source":"clear","x":"` + strings.Repeat("x", DefaultMaxInput) + `"}`
	out = Run(t.Context(), cfg, strings.NewReader(huge))
	require.Equal(t, "bee-hook: cannot read SessionStart input: larger than 65536 bytes", out)
}

func TestRun_NoClaudeAncestor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true, mustNotRetire(t))
	cfg.ClaudePID = 0
	cfg.FindClaude = func(context.Context) (int, bool, error) { return 0, false, nil }

	out := Run(t.Context(), cfg, strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: no claude process above this hook; nothing to retire", out)
}

func TestRun_FindsClaude(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true, retired)
	cfg.ClaudePID = 0
	cfg.FindClaude = func(context.Context) (int, bool, error) { return testClaudePID, true, nil }

	out := Run(t.Context(), cfg, strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: retired agent:x#aaaaaaaa -> agent:x#bbbbbbbb", out)
}

func TestRun_AncestryFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true, mustNotRetire(t))
	cfg.ClaudePID = 0
	cfg.FindClaude = func(context.Context) (int, bool, error) {
		return 0, false, errors.New("ancestry: reading process 9: boom")
	}

	out := Run(t.Context(), cfg, strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: cannot look for the claude process: ancestry: reading process 9: boom", out)
}

func TestRun_NoRunFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true, mustNotRetire(t))
	cfg.ClaudePID = 777

	out := Run(t.Context(), cfg, strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: no bridge registered for claude pid 777 in "+f.dir+"; nothing to retire", out)
}

func TestRun_MalformedRunFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, os.WriteFile(runfile.Path(f.dir, testClaudePID), []byte(`{"port":1,"token":"`+f.entry.Token+`"}`), 0o600))

	out := Run(t.Context(), f.config(true, mustNotRetire(t)), strings.NewReader(clearInput))
	f.requireLine(t, out)
	require.Contains(t, out, runfile.Path(f.dir, testClaudePID))
	require.Contains(t, out, "malformed")
	require.True(t, strings.HasSuffix(out, "; remove it if no bridge is running"), out)
}

func TestRun_StaleRunFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := Run(t.Context(), f.config(false, mustNotRetire(t)), strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: stale run file for dead bridge pid 5151 (claude pid 4242); nothing to retire; removed "+runfile.Path(f.dir, testClaudePID), out)
	_, alives := f.calls()
	require.Equal(t, []int{testBridgePID}, alives)
	_, err := runfile.Read(f.dir, testClaudePID)
	require.ErrorIs(t, err, fs.ErrNotExist)

	out = Run(t.Context(), f.config(false, mustNotRetire(t)), strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: no bridge registered for claude pid 4242 in "+f.dir+"; nothing to retire", out)
}

func TestRun_Retired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := Run(t.Context(), f.config(true, retired), strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: retired agent:x#aaaaaaaa -> agent:x#bbbbbbbb", out)

	retires, alives := f.calls()
	require.Equal(t, []int{testBridgePID}, alives, "the bridge is checked first")
	require.Equal(t, []retireCall{{
		port:  f.entry.Port,
		token: f.entry.Token,
		req:   clearctl.RetireRequest{SessionID: "new-session", TranscriptPath: "/t/new-session.jsonl"},
	}}, retires)
	require.FileExists(t, runfile.Path(f.dir, testClaudePID), "a live bridge's run file stays")
}

func TestRun_RetireAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  func(token string) error
		want string
	}{
		{"202", func(string) error { return &clearctl.StatusError{Code: 202, Body: `{"status":"running"}`} },
			"bee-hook: retire still running (202); the bridge finishes it on its own"},
		{"500", func(string) error { return &clearctl.StatusError{Code: 500, Body: `{"error":"depart failed"}`} },
			`bee-hook: retire failed (bridge pid 5151, port 40123): retire: bridge answered 500 Internal Server Error: {"error":"depart failed"}`},
		{"wrapped 202", func(string) error { return fmt.Errorf("post: %w", &clearctl.StatusError{Code: 202}) },
			"bee-hook: retire still running (202); the bridge finishes it on its own"},
		{"not listening", func(string) error {
			return fmt.Errorf("%w on 127.0.0.1:40123: connection refused", clearctl.ErrNotListening)
		},
			"bee-hook: retire failed (bridge pid 5151, port 40123): retire: bridge not listening on 127.0.0.1:40123: connection refused"},
		{"token in the error", func(token string) error { return errors.New("bad token " + token + "\nsecond line") },
			"bee-hook: retire failed (bridge pid 5151, port 40123): bad token [token] second line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := Run(t.Context(), f.config(true, func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
				return clearctl.RetireResponse{}, tc.err(f.entry.Token)
			}), strings.NewReader(clearInput))
			f.requireLine(t, out)
			require.Equal(t, tc.want, out)
		})
	}
}

func TestRun_ResponseOnOneLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := Run(t.Context(), f.config(true, func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		return clearctl.RetireResponse{Retired: "agent:x#aaaaaaaa\n" + f.entry.Token, Current: "b\r\n\x1b[2J" + strings.Repeat("y", 2000)}, nil
	}), strings.NewReader(clearInput))
	f.requireLine(t, out)
	require.LessOrEqual(t, len(out), maxOutcome+len("…"))
	require.True(t, strings.HasPrefix(out, "bee-hook: retired agent:x#aaaaaaaa [token] -> b   [2Jyyy"), out)
}

func TestRun_Bounded(t *testing.T) {
	t.Parallel()
	t.Run("Retire ignores its ctx", func(t *testing.T) {
		f := newFixture(t)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		cfg := f.config(true, func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
			<-release
			return clearctl.RetireResponse{}, nil
		})
		cfg.Timeout = 50 * time.Millisecond
		start := time.Now()
		out := Run(t.Context(), cfg, strings.NewReader(clearInput))
		require.Equal(t, "bee-hook: gave up after 50ms", out)
		require.Less(t, time.Since(start), testtime.Bound(2*time.Second))
	})
	t.Run("Retire honours its ctx", func(t *testing.T) {
		f := newFixture(t)
		cfg := f.config(true, nil)
		cfg.Retire = func(ctx context.Context, _ int, _ string, _ clearctl.RetireRequest) (clearctl.RetireResponse, error) {
			<-ctx.Done()
			return clearctl.RetireResponse{}, ctx.Err()
		}
		cfg.Timeout = 50 * time.Millisecond
		out := Run(t.Context(), cfg, strings.NewReader(clearInput))
		require.Contains(t, []string{
			"bee-hook: gave up after 50ms",
			"bee-hook: retire failed: no answer from bridge pid 5151 on port 40123 within 50ms",
		}, out)
	})
	t.Run("stdin never closes", func(t *testing.T) {
		f := newFixture(t)
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		cfg := f.config(true, mustNotRetire(t))
		cfg.Timeout = 50 * time.Millisecond
		out := Run(t.Context(), cfg, r)
		require.Equal(t, "bee-hook: gave up after 50ms", out)
	})
	t.Run("ctx cancelled", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		out := Run(ctx, f.config(true, mustNotRetire(t)), r)
		require.Equal(t, "bee-hook: stopped: context canceled", out)
	})
}

func TestRun_Panic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := Run(t.Context(), f.config(true, func(clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		panic("fake bridge exploded")
	}), strings.NewReader(clearInput))
	require.Equal(t, "bee-hook: internal error: fake bridge exploded", out)
}
