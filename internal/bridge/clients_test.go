package bridge

import (
	"context"
	"fmt"
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
	t.Cleanup(s.stop)
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

// Under Codex CLI a wait lasts at most clients.CodexWaitCap: a longer
// timeoutSeconds is refused, naming the bound; other clients get bee's own
// bounds. An empty wait's next step says whether bee can wake the session.
func TestWait_BoundsPerClient(t *testing.T) {
	for _, tc := range []struct {
		client, version string
		ask             int
		most            time.Duration // what the source is given, about
		refused         string        // in the refusal, if refused
		next            string        // in an empty answer's next
	}{
		{client: "codex-mcp-client", version: "0.171.0", ask: 50, most: clients.CodexWaitCap, next: "bee cannot wake this Codex CLI session"},
		{client: "codex-mcp-client", version: "0.171.0", ask: 60, refused: "must be from 1 to 50; got 60"},
		{client: "codex-mcp-client", version: "0.171.0", ask: 0, most: DefaultWaitBounds.Default, next: "bee cannot wake this Codex CLI session"},
		{client: "gemini-cli-mcp-client", version: "0.61.0", ask: 60, most: DefaultWaitBounds.Max, next: "bee cannot wake this Gemini CLI session"},
		{client: "claude-code", version: "2.1.328", ask: 60, most: DefaultWaitBounds.Max, next: "bee wakes this session when an action arrives"},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.client, tc.ask), func(t *testing.T) {
			src := newTimeouts()
			cs := connectAs(t, src, tc.client, tc.version)
			args := map[string]any{}
			if tc.ask != 0 {
				args["timeoutSeconds"] = tc.ask
			}
			res := call(t, cs, ToolWait, args)
			if tc.refused != "" {
				require.Contains(t, said(t, res), tc.refused)
				return
			}
			out := structured[waitOut](t, res)
			require.Empty(t, out.Records)
			require.Contains(t, out.Next, tc.next)
			require.LessOrEqual(t, src.last(), tc.most)
			require.Greater(t, src.last(), tc.most-5*time.Second, "the wait keeps nearly all of its bound")
		})
	}
}

// Each connection's model is told what waiting means under its client: the
// instructions and the descriptions of the tools that wait and post.
func TestServer_DescribesWaitingPerClient(t *testing.T) {
	for _, tc := range []struct {
		client                   string
		wait, await, post, instr string // in each
		never                    []string
	}{
		{client: "codex-mcp-client",
			wait:  "Under Codex CLI a wait lasts at most 50 s",
			await: "bee cannot wake a Codex CLI session when an action you posted ends",
			post:  "bee cannot wake a Codex CLI session when it ends",
			instr: "bee cannot wake this Codex CLI session",
			never: []string{"bee wakes"}},
		{client: "gemini-cli-mcp-client",
			wait:  "bee cannot wake a Gemini CLI session",
			await: "bee cannot wake a Gemini CLI session when an action you posted ends",
			post:  "bee cannot wake a Gemini CLI session when it ends",
			instr: "bee cannot wake this Gemini CLI session",
			never: []string{"bee wakes", "at most 50 s"}},
		{client: "claude-code",
			wait:  "bee wakes this session when an action arrives",
			await: "bee wakes you when an action you posted ends",
			post:  "bee wakes you when it ends",
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
			require.Contains(t, descs[ToolPost], tc.post)
			require.Contains(t, instr, tc.instr)
			require.Contains(t, instr, "bee connects this session to a shared action board")
			for _, w := range tc.never {
				for _, name := range []string{ToolWait, ToolAwait, ToolPost} {
					require.NotContains(t, descs[name], w, name)
				}
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

// A post's next step says how its poster hears the outcome, per client.
func TestPost_NextPerClient(t *testing.T) {
	for client, want := range map[string]string{
		"codex-mcp-client": "bee cannot wake this Codex CLI session when it ends",
		"claude-code":      "bee wakes you when it ends",
	} {
		src := newTimeouts()
		src.PostFunc = func(_ context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
			return actions.Record{ID: "a-1", Title: d.Title, From: string(by), State: actions.Open}, nil
		}
		cs := connectAs(t, src, client, "1")
		out := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "t", "body": "b"}))
		require.Contains(t, out.Next, want, client)
	}
}
