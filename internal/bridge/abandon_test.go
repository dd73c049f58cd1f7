package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/stdio"
	"github.com/tractat-us/bee/internal/testio"
	"github.com/tractat-us/bee/internal/testtime"
)

func openBoard(t *testing.T) *board.Board {
	t.Helper()
	b, err := board.Open(filepath.Join(t.TempDir(), "board.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// Waits on one connection run side by side (the subagents of a session
// share it, and nothing tells their calls apart): each gets an action of
// its own, none ends another, and no action is handed out twice.
func TestWait_ParallelWaitsEachGetTheirOwn(t *testing.T) {
	const n = 3
	b := openBoard(t)
	var mu sync.Mutex
	progressed := map[any]bool{}
	copts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progressed[req.Params.ProgressToken] = true
	}}
	s, cs := connect(t, b, &ServerOptions{ProgressInterval: 20 * time.Millisecond}, copts)
	got := make(chan *mcp.CallToolResult, n)
	for i := range n {
		params := &mcp.CallToolParams{Name: ToolWait, Arguments: map[string]any{"timeoutSeconds": 30}}
		params.SetProgressToken(fmt.Sprint("subagent-", i))
		go func() {
			res, err := cs.CallTool(context.Background(), params)
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			got <- res
		}()
	}
	// Each wait's own progress says it is waiting.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progressed) == n
	}, testtime.Bound(10*time.Second), 5*time.Millisecond, "every wait reports progress")

	posted := map[string]bool{}
	for i := range n {
		rec, err := b.Post(t.Context(), "user:tester", actions.Draft{Title: fmt.Sprint("job ", i)})
		require.NoError(t, err)
		posted[rec.ID] = true
	}
	taken := map[string]bool{}
	for range n {
		select {
		case res := <-got:
			checkAnswer(t, cs, ToolWait, res)
			page := structured[waitOut](t, res)
			require.Len(t, page.Records, 1)
			id := page.Records[0].ID
			require.True(t, posted[id], "%s was posted", id)
			require.False(t, taken[id], "%s handed out twice", id)
			taken[id] = true
			require.Equal(t, string(s.Identity()), page.Records[0].Holder)
		case <-time.After(testtime.Bound(10 * time.Second)):
			t.Fatalf("only %d of %d waits got an action", len(taken), n)
		}
	}
}

// A claim made for a call whose client has gone goes back: the client
// stops reading the bridge's stdout (it closed its end), the wait claims
// the next action, its answer cannot be written, and the transport hands
// it to GiveBackUndelivered. Nothing departs here, so only that can put
// the action back.
func TestWait_ClaimGoesBackWhenTheAnswerCannotBeWritten(t *testing.T) {
	b := openBoard(t)
	released := make(chan string, 1)
	src := releaseWatch{Board: b, released: released}
	logs := &testio.Buffer{}
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer inW.Close()
	defer outW.Close()
	transport := &stdio.Transport{In: inR, Out: outW, OnDropped: func(_ jsonrpc.ID, result json.RawMessage) {
		s.GiveBackUndelivered(result)
	}}
	ss, err := NewServer(Ready(s), nil).Connect(context.Background(), transport, nil)
	require.NoError(t, err)
	defer ss.Close()

	send := func(line string) {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
	}
	out := bufio.NewReader(outR)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"id":1`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + ToolWait + `","arguments":{"timeoutSeconds":30}}}`)

	// The client goes: it will read nothing more.
	require.NoError(t, outR.Close())
	rec, err := b.Post(t.Context(), "user:tester", actions.Draft{Title: "claimed for nobody"})
	require.NoError(t, err)

	// The wait claims it, its answer goes nowhere, and the claim goes back.
	select {
	case id := <-released:
		require.Equal(t, rec.ID, id)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatalf("the claim made for the gone client was not given back; log:\n%s", logs.String())
	}
	r, err := b.Get(t.Context(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, r.State)
}

// releaseWatch is a board that says which action each successful Release
// put back.
type releaseWatch struct {
	*board.Board
	released chan<- string
}

func (w releaseWatch) Release(ctx context.Context, who identity.ID, id string) (actions.Record, error) {
	r, err := w.Board.Release(ctx, who, id)
	if err == nil {
		select {
		case w.released <- id:
		default:
		}
	}
	return r, err
}
