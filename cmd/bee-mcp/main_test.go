package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/bridgetest"
	"github.com/tractat-us/bee/internal/testtime"
	"github.com/tractat-us/bee/internal/version"
)

// TestMain lets the test binary impersonate bee-mcp, so the bridge under
// test is a real process speaking over real pipes.
func TestMain(m *testing.M) {
	if os.Getenv("BEE_TEST_RUN_AS") == "bee-mcp" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startBridge runs bee-mcp as a subprocess with a private run directory and
// board, and the given extra arguments.
func startBridge(t *testing.T, env []string, args ...string) *bridgetest.Proc {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"--source", "none", "--agent", "tester"}, args...)...)
	cmd.Env = append(os.Environ(),
		"BEE_TEST_RUN_AS=bee-mcp",
		"BEE_RUN_DIR="+dir+"/run",
		"BEE_BOARD="+dir+"/board.db",
		"BEE_LOG_LEVEL=debug",
	)
	cmd.Env = append(cmd.Env, env...)
	return bridgetest.Start(t, cmd)
}

func TestBridge_InitializeHandshake(t *testing.T) {
	p := startBridge(t, nil)
	// Pipelined, as a client that does not wait between lines.
	p.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	p.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	init := p.Await(1, 10*time.Second)
	require.Nil(t, init.Error)
	require.Contains(t, string(init.Result), `"name":"bee"`)
	list := p.Await(2, 10*time.Second)
	require.Nil(t, list.Error)
	for _, name := range []string{"bee_wait_action", "bee_list_actions", "bee_whoami", "bee_post_action", "bee_finish_action", "bee_release_action"} {
		require.Contains(t, string(list.Result), `"name":"`+name+`"`)
	}
	require.Contains(t, string(list.Result), `"outputSchema"`)
}

// TestBridge_DiscoverHandshake replays what Claude Code 2.1.328 sends: it
// never sends initialize.
func TestBridge_DiscoverHandshake(t *testing.T) {
	p := startBridge(t, []string{"BEE_PROGRESS_INTERVAL=50ms"})
	f, err := os.Open("testdata/claude-code-2.1.328-client-lines.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.Len(t, lines, 6)
	// The first four lines: discover probe, subscriptions/listen, discover, tools/list.
	for _, l := range lines[:4] {
		p.Send(l)
	}
	probe := p.Await("server-discover-probe-1", 10*time.Second)
	require.Nil(t, probe.Error, probe.Raw)
	require.Contains(t, string(probe.Result), "2026-07-28")
	p.Await(0, 10*time.Second)
	list := p.Await(1, 10*time.Second)
	require.Nil(t, list.Error, list.Raw)
	require.Contains(t, string(list.Result), `"name":"bee_wait_action"`)
	// The recorded tools/call used the recorder's "hold" tool: call ours
	// the same way, then cancel it as the recorded Esc did.
	call := strings.Replace(lines[4], `"name":"hold","arguments":{"seconds":10}`, `"name":"bee_wait_action","arguments":{"timeoutSeconds":10}`, 1)
	require.NotEqual(t, lines[4], call)
	p.Send(call)
	awaitProgress(p, "2") // the recorded call's progress token: it waits
	p.Send(lines[5])      // notifications/cancelled for id 2
	p.Call(3, "ping", nil)
	p.Await(3, 5*time.Second)
	// Closing stdin drains every answer still owed before the bridge exits.
	p.CloseStdin()
	require.Equal(t, 0, p.WaitExit(5*time.Second))
	require.Empty(t, p.Responses(2), "a cancelled request gets no response")
}

// awaitProgress waits for a progress notification for token (as JSON): the
// call that carries it is waiting.
func awaitProgress(p *bridgetest.Proc, token string) {
	p.Find(10*time.Second, "progress for token "+token, func(m bridgetest.Message) bool {
		return m.Method == "notifications/progress" && strings.Contains(string(m.Params), `"progressToken":`+token)
	})
}

func callTool(p *bridgetest.Proc, id any, name string, args any) bridgetest.ToolResult {
	p.Call(id, "tools/call", bridgetest.ToolCall(name, args, nil))
	return p.DecodeResult(p.Await(id, 70*time.Second))
}

func TestBridge_WaitRefusals(t *testing.T) {
	p := startBridge(t, nil)
	p.Initialize()
	for i, tc := range []struct {
		args json.RawMessage
		want string
	}{
		{json.RawMessage(`{"timeoutSeconds":"30"}`), "timeoutSeconds"},
		{json.RawMessage(`{"timeoutSeconds":30.5}`), "timeoutSeconds"},
		{json.RawMessage(`{"timeoutSeconds":0}`), "timeoutSeconds"},
		{json.RawMessage(`{"timeoutSeconds":61}`), "timeoutSeconds"},
		{json.RawMessage(`{"timeoutSeconds":true}`), "timeoutSeconds"},
		{json.RawMessage(`{"timeoutSeconds":1,"cursor":7}`), "cursor"},
		{json.RawMessage(`{"timeoutSeconds":1,"cursor":["a"]}`), "cursor"},
	} {
		r := callTool(p, 10+i, "bee_wait_action", tc.args)
		require.True(t, r.IsError, "%s", tc.args)
		// The model reads the structured content, not the text: the
		// refusal and what to do about it are there.
		var g struct{ Error, Next string }
		require.NoError(t, json.Unmarshal(r.StructuredContent, &g), "%s", tc.args)
		require.Contains(t, g.Error, tc.want, "%s", tc.args)
		require.Contains(t, g.Next, "bee_wait_action again", "%s", tc.args)
	}
}

func TestBridge_WaitTimesOutInBound(t *testing.T) {
	t.Parallel()
	p := startBridge(t, nil)
	p.Initialize()
	start := time.Now()
	r := callTool(p, 5, "bee_wait_action", json.RawMessage(`{"timeoutSeconds":1,"cursor":null}`))
	took := time.Since(start)
	require.False(t, r.IsError, r.Text())
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, testtime.Bound(2*time.Second))
	var page struct {
		actions.Page
		Next string
	}
	require.NoError(t, json.Unmarshal(r.StructuredContent, &page))
	require.NotNil(t, page.Records)
	require.Empty(t, page.Records)
	require.NotEmpty(t, page.Cursor)
	// What the model reads after an empty wait: end the turn, bee wakes it.
	require.Contains(t, page.Next, "end your turn")
	require.Contains(t, page.Next, "bee wakes this session")
}

func TestBridge_WaitProgress(t *testing.T) {
	t.Parallel()
	p := startBridge(t, []string{"BEE_PROGRESS_INTERVAL=200ms"})
	p.Initialize()
	p.Call(7, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 2}, "tok-7"))
	resp := p.Await(7, 10*time.Second)
	var progress []bridgetest.Message
	for _, m := range p.Messages() {
		if m.Method == "notifications/progress" {
			require.Contains(t, string(m.Params), `"progressToken":"tok-7"`)
			require.True(t, m.At.Before(resp.At) || m.At.Equal(resp.At), "progress after the response: %s", m.Raw)
			progress = append(progress, m)
		}
	}
	require.GreaterOrEqual(t, len(progress), 3, "progress while waiting")
	// Nothing in the last 500 ms: at 200 ms ticks over 2 s that is at most 7.
	require.LessOrEqual(t, len(progress), 7)
}

func TestBridge_StdoutIsOnlyJSONRPCAtDebug(t *testing.T) {
	t.Parallel()
	p := startBridge(t, nil, "--log-level", "debug")
	p.Initialize()
	callTool(p, 2, "bee_whoami", nil)
	callTool(p, 3, "bee_list_actions", nil)
	p.CloseStdin()
	require.Equal(t, 0, p.WaitExit(5*time.Second))
	require.NotEmpty(t, p.Stderr(), "the bridge logged, to stderr")
	// bridgetest fails the test at cleanup for any non-JSON-RPC stdout line.
}

func TestBridge_MalformedLinesWhileWaiting(t *testing.T) {
	t.Parallel()
	p := startBridge(t, nil)
	p.Initialize()
	start := time.Now()
	p.Call(9, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 1}, nil))
	p.Send(`this is not json`)
	p.Send(`[{"jsonrpc":"2.0","id":20,"method":"ping"}]`)
	p.Send(`{"jsonrpc":"1.0","id":21,"method":"ping"}`)
	p.Send(`{"jsonrpc":"2.0","id":22,"method":"ping"}`)
	p.Await(22, 5*time.Second)
	var codes []int
	for _, m := range p.Messages() {
		if m.Error != nil {
			codes = append(codes, m.Error.Code)
		}
	}
	require.Contains(t, codes, -32700, "parse error answered")
	require.Contains(t, codes, -32600, "invalid request answered")
	r := p.DecodeResult(p.Await(9, 5*time.Second))
	require.False(t, r.IsError, r.Text())
	require.Less(t, time.Since(start), testtime.Bound(3*time.Second))
}

func TestBridge_CleanEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(p *bridgetest.Proc)
	}{
		{"stdin closed", func(p *bridgetest.Proc) { p.CloseStdin() }},
		{"SIGINT", func(p *bridgetest.Proc) { p.Signal(syscall.SIGINT) }},
		{"SIGTERM", func(p *bridgetest.Proc) { p.Signal(syscall.SIGTERM) }},
		{"SIGHUP", func(p *bridgetest.Proc) { p.Signal(syscall.SIGHUP) }},
		{"SIGINT then SIGTERM", func(p *bridgetest.Proc) {
			p.Signal(syscall.SIGINT)
			time.Sleep(100 * time.Millisecond)
			p.Signal(syscall.SIGTERM)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startBridge(t, []string{"BEE_PROGRESS_INTERVAL=50ms"})
			p.Initialize()
			// A wait in flight must not hold the exit up; its progress says
			// it waits.
			p.Call(2, "tools/call", bridgetest.ToolCall("bee_wait_action", map[string]any{"timeoutSeconds": 60}, "w2"))
			awaitProgress(p, `"w2"`)
			start := time.Now()
			tc.end(p)
			require.Equal(t, 0, p.WaitExit(5*time.Second))
			require.Less(t, time.Since(start), testtime.Bound(2*time.Second))
		})
	}
}

func TestBridge_HelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "--version"} {
		cmd := exec.Command(os.Args[0], arg)
		cmd.Env = append(os.Environ(), "BEE_TEST_RUN_AS=bee-mcp")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%s: %s", arg, stderr.String())
		require.Empty(t, stdout.String(), "stdout is for JSON-RPC only")
		require.Contains(t, stderr.String(), "bee-mcp")
		if arg == "--version" {
			require.Equal(t, "bee-mcp "+version.Version+"\n", stderr.String())
		}
	}
}

func TestBridge_BadFlags(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--source", "nowhere")
	cmd.Env = append(os.Environ(), "BEE_TEST_RUN_AS=bee-mcp")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, string(out), "--source")
	require.Contains(t, string(out), "Try: bee-mcp --help")
}
