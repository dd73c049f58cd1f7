package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client that writes its requests and closes stdin at once, as a script
// piping into bee-mcp does, gets every answer before the bridge ends.
func TestBridge_AnswersBeforeStdinEOFEnds(t *testing.T) {
	p := startBridge(t, nil)
	p.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"script","version":"0"}}}`)
	p.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bee_whoami","arguments":{}}}`)
	p.CloseStdin()
	require.Equal(t, 0, p.WaitExit(10*time.Second))
	init := p.Await(1, time.Second)
	require.Nil(t, init.Error)
	require.Contains(t, string(init.Result), `"name":"bee"`)
	who := p.DecodeResult(p.Await(2, time.Second))
	require.False(t, who.IsError, who.Text())
	require.Contains(t, who.Text(), "agent:tester#")
}
