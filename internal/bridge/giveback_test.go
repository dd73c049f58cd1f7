package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/stdio"
	"github.com/tractat-us/bee/internal/testtime"
)

// A give-back is a board write that can wait on another process's lock.
// The transport hands a dropped answer over on its reading goroutine: a
// release that hangs must not hold up the next line.
func TestGiveBack_SlowReleaseDoesNotDelayTheNextLine(t *testing.T) {
	t.Parallel()
	releasing := make(chan struct{})
	unblock := make(chan struct{})
	src := &actionstest.Source{
		NextFunc: func(_ context.Context, who identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
			return actions.Page{Records: []actions.Record{{ID: "a-1", State: actions.Claimed, Holder: string(who)}}, Cursor: "c1"}, nil
		},
		ReleaseFunc: func(context.Context, identity.ID, string) (actions.Record, error) {
			close(releasing)
			<-unblock // the board is stuck
			return actions.Record{}, nil
		},
	}
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src})
	require.NoError(t, err)
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { inW.Close(); outR.Close(); outW.Close() })
	transport := &stdio.Transport{In: inR, Out: outW, LateCancelWindow: time.Minute,
		OnDropped: func(_ jsonrpc.ID, result json.RawMessage) { s.GiveBackUndelivered(result) }}
	ss, err := NewServer(Ready(s), nil).Connect(context.Background(), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })

	lines := make(chan string, 16)
	go func() { // ends when outR is closed
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	send := func(line string) {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
	}
	answer := func(id string) string {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				require.True(t, ok, "stdout closed before the answer to id %s", id)
				if strings.Contains(line, `"id":`+id+`,`) || strings.Contains(line, `"id":`+id+`}`) {
					return line
				}
			case <-time.After(testtime.Bound(10 * time.Second)):
				t.Fatalf("no answer to id %s within 10 s", id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	answer("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + ToolWait + `","arguments":{"timeoutSeconds":5}}}`)
	require.Contains(t, answer("2"), `"a-1"`)
	// The client cancels the call it has just been answered: it discards
	// the answer, and the transport hands it over for its claim to go back.
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	select {
	case <-releasing:
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the dropped answer's claim was never given back")
	}
	// The release hangs; the next line is answered all the same.
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	answer("3")
	close(unblock)
	require.NoError(t, s.Close())
	require.Equal(t, []string{"a-1"}, src.Released())
}
