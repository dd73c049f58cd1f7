package bridge

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/clients"
)

// connectAs serves a session of src to a client that names itself name in
// the handshake, as Codex CLI and Gemini CLI do.
func connectAs(t *testing.T, src actions.Source, name, version string) *mcp.ClientSession {
	t.Helper()
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, ClaudePID: 4242})
	require.NoError(t, err)
	t.Cleanup(s.closeGiveBacks)
	srv := NewServer(Ready(s), nil)
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		cancel()
	})
	return cs
}

// timeouts is a source that records the timeout each Next is given and
// finds nothing at once.
type timeouts struct {
	*actionstest.Source
	mu  sync.Mutex
	got []time.Duration
}

func newTimeouts() *timeouts {
	s := &timeouts{}
	s.Source = &actionstest.Source{NextFunc: func(_ context.Context, _ identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
		s.mu.Lock()
		s.got = append(s.got, timeout)
		s.mu.Unlock()
		return actions.Page{Cursor: after}, nil
	}}
	return s
}

func (s *timeouts) last() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

// Under Codex CLI a wait is cut to clients.CodexWaitCap, whatever it is
// asked; other clients get what they ask, up to bee's own bound. Each is
// told so in the result and in the tool's description.
func TestWait_CappedForCodex(t *testing.T) {
	for _, tc := range []struct {
		client, version string
		ask             int
		most            time.Duration
		empty           string // in the text of an empty result
	}{
		{client: "codex-mcp-client", version: "0.171.0", ask: 60, most: clients.CodexWaitCap, empty: "No action within 50 s. There is no work now. bee cannot wake this Codex CLI session"},
		{client: "codex-mcp-client", version: "0.171.0", ask: 20, most: 20 * time.Second, empty: "No action within 20 s."},
		{client: "gemini-cli-mcp-client", version: "0.61.0", ask: 60, most: MaxWait, empty: "bee cannot wake this Gemini CLI session"},
		{client: "claude-code", version: "2.1.328", ask: 60, most: MaxWait, empty: "bee wakes this session when an action arrives"},
	} {
		t.Run(tc.client+"/"+time.Duration(tc.ask*int(time.Second)).String(), func(t *testing.T) {
			src := newTimeouts()
			cs := connectAs(t, src, tc.client, tc.version)
			res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": tc.ask})
			require.False(t, res.IsError, text(res))
			require.LessOrEqual(t, src.last(), tc.most)
			require.Greater(t, src.last(), tc.most-5*time.Second, "the wait keeps nearly all of its bound")
			require.Contains(t, text(res), tc.empty)
		})
	}
}

// Each connection's model is told what waiting means under its client: the
// instructions and the two wait tools' descriptions.
func TestServer_DescribesWaitingPerClient(t *testing.T) {
	for _, tc := range []struct {
		client             string
		wait, await, instr string // in each
		never              []string
	}{
		{client: "codex-mcp-client",
			wait:  "Under Codex CLI a wait lasts at most 50 s",
			await: "bee cannot wake a Codex CLI session when an action you posted ends",
			instr: "bee cannot wake this Codex CLI session",
			never: []string{"bee wakes"}},
		{client: "gemini-cli-mcp-client",
			wait:  "bee cannot wake a Gemini CLI session",
			await: "bee cannot wake a Gemini CLI session when an action you posted ends",
			instr: "bee cannot wake this Gemini CLI session",
			never: []string{"bee wakes", "at most 50 s"}},
		{client: "claude-code",
			wait:  "bee wakes this session when an action arrives",
			await: "bee wakes you when an action you posted ends",
			instr: "bee wakes this session with a message",
			never: []string{"cannot wake", "at most 50 s"}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			cs := connectAs(t, newTimeouts(), tc.client, "1")
			tools, err := cs.ListTools(t.Context(), nil)
			require.NoError(t, err)
			descs := map[string]string{}
			for _, tool := range tools.Tools {
				descs[tool.Name] = tool.Description
			}
			instr := cs.InitializeResult().Instructions
			require.Contains(t, descs[ToolWait], tc.wait)
			require.Contains(t, descs[ToolAwait], tc.await)
			require.Contains(t, instr, tc.instr)
			require.Contains(t, instr, "bee connects this session to a shared action board")
			for _, w := range tc.never {
				require.NotContains(t, descs[ToolWait], w)
				require.NotContains(t, descs[ToolAwait], w)
				require.NotContains(t, instr, w)
			}
		})
	}
}

// bee_whoami names the client from the handshake.
func TestWhoami_NamesClient(t *testing.T) {
	cs := connectAs(t, newTimeouts(), "codex-mcp-client", "0.171.0")
	w := structured[Whoami](t, call(t, cs, ToolWhoami, map[string]any{}))
	require.Equal(t, "Codex CLI 0.171.0", w.Client)
	require.Equal(t, 4242, *w.ClaudePID)
}
