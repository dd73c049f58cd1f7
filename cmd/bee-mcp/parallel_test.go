package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/bridgetest"
)

// Two subagents of one session share its connection, and their calls
// carry nothing that tells them apart: two bee_wait_action calls in flight
// on one bridge each get an action of their own, and neither ends the
// other (a newer wait used to supersede the older, and two subagents
// waiting superseded each other in strict alternation).
func TestBridge_ParallelWaits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	p := startBridge(t, []string{"BEE_BOARD=" + path, "BEE_PROGRESS_INTERVAL=50ms"}, "--source", "board")
	p.Initialize()
	for i, tok := range []string{"sub-a", "sub-b"} {
		p.Call(10+i, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 30}, tok))
	}
	awaitProgress(p, `"sub-a"`)
	awaitProgress(p, `"sub-b"`)

	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	posted := map[string]bool{}
	for i := range 2 {
		rec, err := b.Post(context.Background(), "user:alice", actions.Draft{Title: fmt.Sprint("job ", i)})
		require.NoError(t, err)
		posted[rec.ID] = true
	}
	taken := map[string]bool{}
	for i := range 2 {
		r := p.DecodeResult(p.Await(10+i, 10*time.Second))
		require.False(t, r.IsError, r.Text())
		var page actions.Page
		require.NoError(t, json.Unmarshal(r.StructuredContent, &page))
		require.Len(t, page.Records, 1, "wait %d got an action", i)
		id := page.Records[0].ID
		require.True(t, posted[id])
		require.False(t, taken[id], "%s handed out twice", id)
		taken[id] = true
	}
}
