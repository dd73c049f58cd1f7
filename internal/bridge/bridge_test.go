package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

func TestMain(m *testing.M) { testtime.VerifyTestMain(m) }

// connect serves a session over in-memory transports and returns a client
// session connected to it.
func connect(t *testing.T, src actions.Source, opts *ServerOptions, copts *mcp.ClientOptions) (*Session, *mcp.ClientSession) {
	t.Helper()
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, ClaudePID: 4242, SessionID: "s-1"})
	require.NoError(t, err)
	t.Cleanup(s.stop) // the source is the caller's to close
	return s, connectPending(t, Ready(s), opts, copts)
}

// connectPending serves the session p holds or will hold.
func connectPending(t *testing.T, p *Pending, opts *ServerOptions, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv := NewServer(p, opts)
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, copts).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		cancel()
	})
	return cs
}

// call calls a tool and holds its answer to the rules every answer keeps
// (checkAnswer).
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	checkAnswer(t, cs, name, res)
	return res
}

// checkAnswer holds an answer to what a client that reads only structured
// content needs: it validates against the tool's output schema (Claude
// Code's client refuses one that does not, on an error result too), and a
// refusal says what was wrong and what to do.
func checkAnswer(t *testing.T, cs *mcp.ClientSession, name string, res *mcp.CallToolResult) {
	t.Helper()
	require.NotNil(t, res.StructuredContent, "%s answers with structured content", name)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var instance any
	require.NoError(t, json.Unmarshal(raw, &instance))
	require.NoError(t, outputSchemaOf(t, cs, name).Validate(instance), "%s answer %s", name, raw)
	if res.IsError {
		var g Guidance
		require.NoError(t, json.Unmarshal(raw, &g))
		require.NotEmpty(t, g.Error, "%s refusal %s says what was wrong", name, raw)
		require.NotEmpty(t, g.Next, "%s refusal %s says what to do", name, raw)
	}
}

// outputSchemaOf resolves the output schema tools/list gives for name.
func outputSchemaOf(t *testing.T, cs *mcp.ClientSession, name string) *jsonschema.Resolved {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	for _, tool := range list.Tools {
		if tool.Name != name {
			continue
		}
		raw, err := json.Marshal(tool.OutputSchema)
		require.NoError(t, err)
		var s jsonschema.Schema
		require.NoError(t, json.Unmarshal(raw, &s))
		r, err := s.Resolve(nil)
		require.NoError(t, err)
		return r
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// said is what a refusal tells the model: what was wrong, then what to do.
func said(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.True(t, res.IsError, "want a refusal, got %s", text(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var g Guidance
	require.NoError(t, json.Unmarshal(raw, &g))
	return g.Error + "\n" + g.Next
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	require.False(t, res.IsError, "tool error: %s", text(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var v T
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

func TestServer_ToolsList(t *testing.T) {
	_, cs := connect(t, nil, nil, nil)
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
	}
	require.ElementsMatch(t, []string{ToolWait, ToolList, ToolWhoami, ToolPost, ToolFinish, ToolRelease, ToolFail, ToolCancel, ToolAwait, ToolPlan,
		ToolReserve, ToolReleasePaths, ToolListReservations}, names)
}

// waitingTools are the tools that wait within timeoutSeconds, with the
// arguments each needs besides it and a source under which each waits out
// its bound: they share the bounds, refusals, progress and cancel rules.
func waitingTools() []struct {
	tool string
	args map[string]any
	src  actions.Source
} {
	awaits := &actionstest.Source{AwaitFunc: func(ctx context.Context, _ actions.Poster, _ []string, timeout time.Duration) ([]actions.Record, error) {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return []actions.Record{}, nil
		}
	}}
	return []struct {
		tool string
		args map[string]any
		src  actions.Source
	}{
		{ToolWait, map[string]any{}, nil},
		{ToolAwait, map[string]any{"ids": []string{"a-1"}}, awaits},
	}
}

// withArgs is base with the JSON object extra's fields added.
func withArgs(t *testing.T, base map[string]any, extra string) json.RawMessage {
	t.Helper()
	// RawMessage keeps extra's values as written: 1e1 must stay 1e1.
	m := map[string]json.RawMessage{}
	for k, v := range base {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		m[k] = raw
	}
	require.NoError(t, json.Unmarshal([]byte(extra), &m))
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	return raw
}

func TestWaits_TimeoutRefusals(t *testing.T) {
	for _, wt := range waitingTools() {
		_, cs := connect(t, wt.src, nil, nil)
		for _, tc := range []struct {
			name string
			args string
		}{
			{"string timeout", `{"timeoutSeconds":"30"}`},
			{"fraction", `{"timeoutSeconds":30.5}`},
			{"zero", `{"timeoutSeconds":0}`},
			{"over cap", `{"timeoutSeconds":61}`},
			{"boolean", `{"timeoutSeconds":true}`},
			{"exponent", `{"timeoutSeconds":1e1}`},
		} {
			t.Run(wt.tool+"/"+tc.name, func(t *testing.T) {
				res := call(t, cs, wt.tool, withArgs(t, wt.args, tc.args))
				require.Contains(t, said(t, res), "argument timeoutSeconds")
			})
		}
	}
}

func TestWait_Refusals(t *testing.T) {
	_, cs := connect(t, nil, nil, nil)
	for _, tc := range []struct {
		name string
		args string
		want string
	}{
		{"cursor number", `{"timeoutSeconds":1,"cursor":5}`, "cursor"},
		{"cursor object", `{"timeoutSeconds":1,"cursor":{}}`, "cursor"},
		{"cursor not made by source", `{"timeoutSeconds":1,"cursor":"17"}`, "cursor"},
		{"unknown argument", `{"timeout":1}`, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, ToolWait, json.RawMessage(tc.args))
			require.Contains(t, said(t, res), tc.want)
		})
	}
}

// A wait returns when its bound passes, to the fake-clock instant: the
// bound given, 45 s when none is, at most 60 s.
func TestWaits_TimeOutAtTheirBound(t *testing.T) {
	t.Parallel()
	for _, wt := range waitingTools() {
		for _, tc := range []struct {
			args string
			want time.Duration
		}{
			{`{"timeoutSeconds":1}`, time.Second},
			{`{}`, DefaultWaitBounds.Default},
			{`{"timeoutSeconds":60}`, DefaultWaitBounds.Max},
		} {
			t.Run(wt.tool+"/"+tc.args, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					_, cs := connect(t, wt.src, nil, nil)
					start := time.Now()
					res := call(t, cs, wt.tool, withArgs(t, wt.args, tc.args))
					require.Equal(t, tc.want, time.Since(start))
					require.False(t, res.IsError, text(res))
				})
			})
		}
	}
}

func TestWait_EmptyPageAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cs := connect(t, nil, nil, nil)
		res := call(t, cs, ToolWait, json.RawMessage(`{"timeoutSeconds":1,"cursor":null}`))
		page := structured[waitOut](t, res)
		require.NotNil(t, page.Records)
		require.Empty(t, page.Records)
		require.Equal(t, actions.StartCursor, page.Cursor)
		require.Equal(t, emptyWaitNext, page.Next, "the model reads what to do in the structured answer")
		require.Contains(t, page.Next, "end your turn")
		require.Contains(t, page.Next, "bee wakes this session")
	})
}

// ticks returns the progress a wait of bound d reports at every interval:
// elapsed seconds at each tick, none in the last 500 ms.
func ticks(every, d time.Duration) []float64 {
	var want []float64
	for at := every; d-at >= progressQuiet; at += every {
		want = append(want, at.Seconds())
	}
	return want
}

// A waiting call with a progress token reports progress every interval,
// elapsed seconds of the bound, and none in its last 500 ms (a
// notification there could land with or after the result).
func TestWaits_Progress(t *testing.T) {
	t.Parallel()
	require.Len(t, ticks(DefaultProgressInterval, DefaultWaitBounds.Default), 22, "a 45 s wait reports 22 times")
	for _, wt := range waitingTools() {
		for _, tc := range []struct {
			name  string
			every time.Duration // 0: DefaultProgressInterval
			args  string
			bound time.Duration
		}{
			// At 500 ms before the bound a tick still reports; at 400 ms none.
			{"100ms over 1s", 100 * time.Millisecond, `{"timeoutSeconds":1}`, time.Second},
			{"default over default", 0, `{}`, DefaultWaitBounds.Default},
			{"default over 41s", 0, `{"timeoutSeconds":41}`, 41 * time.Second},
		} {
			t.Run(wt.tool+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var got []float64
					copts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, req.Params.Progress)
						assert.Equal(t, tc.bound.Seconds(), req.Params.Total)
					}}
					_, cs := connect(t, wt.src, &ServerOptions{ProgressInterval: tc.every}, copts)
					params := &mcp.CallToolParams{Name: wt.tool, Arguments: withArgs(t, wt.args, tc.args)}
					params.SetProgressToken("p1")
					res, err := cs.CallTool(t.Context(), params)
					require.NoError(t, err)
					require.False(t, res.IsError, text(res))
					synctest.Wait() // every notification sent is handled
					every := tc.every
					if every == 0 {
						every = DefaultProgressInterval
					}
					mu.Lock()
					defer mu.Unlock()
					require.InDeltaSlice(t, ticks(every, tc.bound), got, 1e-9)
				})
			})
		}
	}
}

func TestWait_NoProgressWithoutToken(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n int
		var mu sync.Mutex
		copts := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			n++
			mu.Unlock()
		}}
		_, cs := connect(t, nil, &ServerOptions{ProgressInterval: 50 * time.Millisecond}, copts)
		call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Zero(t, n)
	})
}

// A cancelled wait ends the instant its cancel arrives.
func TestWaits_CancelEndsAtOnce(t *testing.T) {
	t.Parallel()
	for _, wt := range waitingTools() {
		t.Run(wt.tool, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, cs := connect(t, wt.src, nil, nil)
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(200*time.Millisecond, cancel)
				start := time.Now()
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: wt.tool, Arguments: withArgs(t, wt.args, `{"timeoutSeconds":30}`)})
				require.ErrorIs(t, err, context.Canceled)
				require.Equal(t, 200*time.Millisecond, time.Since(start))
			})
		})
	}
}

func TestWhoami(t *testing.T) {
	_, cs := connect(t, nil, nil, nil)
	w := structured[Whoami](t, call(t, cs, ToolWhoami, nil))
	require.Regexp(t, `^agent:tester#[0-9a-f]{8}$`, w.Identity)
	require.Equal(t, "tester", w.Agent)
	require.NotNil(t, w.ClaudePID)
	require.Equal(t, 4242, *w.ClaudePID)
	require.Equal(t, "s-1", w.SessionID)
	require.Equal(t, "none", w.Source)
}

func TestWhoami_NoClaude(t *testing.T) {
	s, err := NewSession(t.Context(), Config{Agent: "x"})
	require.NoError(t, err)
	raw, err := json.Marshal(s.Whoami())
	require.NoError(t, err)
	require.Contains(t, string(raw), `"claudePid":null`)
}

func TestSession_RetireMintsThenReports(t *testing.T) {
	src := &actionstest.Source{}
	s, cs := connect(t, src, nil, nil)
	before := s.Identity()
	res, err := s.Retire(t.Context(), RetireRequest{SessionID: "s-2", TranscriptPath: "/t/s-2.jsonl"})
	require.NoError(t, err)
	require.Equal(t, before, res.Retired)
	require.Equal(t, s.Identity(), res.Current)
	require.NotEqual(t, before, s.Identity())
	require.Equal(t, []identity.ID{before}, src.Departed())
	w := structured[Whoami](t, call(t, cs, ToolWhoami, nil))
	require.Equal(t, string(res.Current), w.Identity)
	require.Equal(t, "s-2", w.SessionID)
	require.Equal(t, "/t/s-2.jsonl", w.TranscriptPath)
	require.Equal(t, 1, w.Retired)
	joined := src.Joined()
	require.Len(t, joined, 2)
	require.Equal(t, s.Identity(), joined[1].ID)
	require.Equal(t, "s-2", joined[1].SessionID)
}

func TestSession_RetireReportFailsStaysOnNew(t *testing.T) {
	src := &actionstest.Source{DepartFunc: func(context.Context, identity.ID) error { return errors.New("board locked") }}
	s, err := NewSession(t.Context(), Config{Agent: "x", Source: src})
	require.NoError(t, err)
	before := s.Identity()
	res, err := s.Retire(t.Context(), RetireRequest{})
	require.ErrorContains(t, err, "board locked")
	require.NotEqual(t, before, s.Identity(), "never goes back to the retired identity")
	require.Equal(t, s.Identity(), res.Current)
}

func TestSession_ConcurrentRetiresEachRetireOne(t *testing.T) {
	src := &actionstest.Source{}
	s, err := NewSession(t.Context(), Config{Agent: "x", Source: src})
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make(chan Retirement, 8)
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			res, err := s.Retire(t.Context(), RetireRequest{})
			errs <- err
			results <- res
		})
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[identity.ID]bool{}
	for r := range results {
		require.False(t, seen[r.Retired], "identity %s retired twice", r.Retired)
		seen[r.Retired] = true
	}
	require.Len(t, src.Departed(), 8)
}

func TestWait_RetireEndsWaitUnderOldIdentity(t *testing.T) {
	waiting := make(chan struct{})
	src := &actionstest.Source{NextFunc: func(ctx context.Context, _ identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
		close(waiting)
		<-ctx.Done()
		return actions.Page{}, ctx.Err()
	}}
	s, cs := connect(t, src, nil, nil)
	old := s.Identity()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolWait, Arguments: map[string]any{"timeoutSeconds": 30}})
		if err == nil {
			done <- res
		}
		close(done)
	}()
	<-waiting
	_, err := s.Retire(t.Context(), RetireRequest{})
	require.NoError(t, err)
	select {
	case res := <-done:
		require.NotNil(t, res)
		require.Contains(t, said(t, res), string(old))
		require.Contains(t, said(t, res), "call bee_wait_action again")
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("wait under the retired identity did not end")
	}
}

func TestWait_CancelAfterClaimGivesItBack(t *testing.T) {
	claimed := make(chan struct{})
	src := &actionstest.Source{
		NextFunc: func(ctx context.Context, who identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
			close(claimed)
			<-ctx.Done() // the call is cancelled right as the claim lands
			return actions.Page{Records: []actions.Record{{ID: "a-1", State: actions.Claimed, Holder: string(who)}}, Cursor: "c1"}, nil
		},
		ReleaseFunc: func(_ context.Context, who identity.ID, id string) (actions.Record, error) {
			return actions.Record{ID: id, State: actions.Open}, nil
		},
	}
	_, cs := connect(t, src, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-claimed; cancel() }()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolWait, Arguments: map[string]any{"timeoutSeconds": 5}})
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return len(src.Released()) == 1 }, testtime.Bound(5*time.Second), 10*time.Millisecond)
	require.Equal(t, []string{"a-1"}, src.Released())
}

func TestSession_GiveBackUndelivered(t *testing.T) {
	src := &actionstest.Source{ReleaseFunc: func(_ context.Context, _ identity.ID, id string) (actions.Record, error) {
		return actions.Record{ID: id}, nil
	}}
	s, err := NewSession(t.Context(), Config{Agent: "x", Source: src})
	require.NoError(t, err)
	// A wait's answer marks the claims it hands over: those go back.
	s.GiveBackUndelivered(json.RawMessage(`{"_meta":{"bee/claims":[{"id":"a-9","holder":"agent:x#00000000"}]},"content":[],"structuredContent":{"records":[{"id":"a-9","state":"claimed","holder":"agent:x#00000000"}],"cursor":"c"}}`))
	// A list shows claims but hands none over: nothing goes back.
	s.GiveBackUndelivered(json.RawMessage(`{"content":[],"structuredContent":{"records":[{"id":"a-3","state":"claimed","holder":"agent:other#00000001"}],"cursor":"c"}}`))
	s.GiveBackUndelivered(json.RawMessage(`{"content":[],"structuredContent":{"identity":"agent:x#00000000"}}`))
	s.GiveBackUndelivered(json.RawMessage(`not json`))
	s.GiveBackUndelivered(nil)
	require.NoError(t, s.Close()) // drains the give-back worker
	require.Equal(t, []string{"a-9"}, src.Released())
}

// The answer a wait gives carries the claims it hands over in _meta, which
// is what GiveBackUndelivered reads when that answer is dropped.
func TestWait_MarksTheClaimsItHandsOver(t *testing.T) {
	src := &actionstest.Source{NextFunc: func(_ context.Context, who identity.ID, _ actions.Cursor, _ time.Duration) (actions.Page, error) {
		return actions.Page{Records: []actions.Record{{ID: "a-5", State: actions.Claimed, Holder: string(who)}}, Cursor: "c5"}, nil
	}}
	s, cs := connect(t, src, nil, nil)
	res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
	require.False(t, res.IsError, text(res))
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	s.GiveBackUndelivered(raw)
	require.Eventually(t, func() bool { return len(src.Released()) == 1 }, testtime.Bound(5*time.Second), 5*time.Millisecond)
	require.Equal(t, []string{"a-5"}, src.Released())
	list := call(t, cs, ToolList, nil)
	raw, err = json.Marshal(list)
	require.NoError(t, err)
	require.NotContains(t, string(raw), claimsMetaKey)
}

func TestTools_SourceRefusalsByName(t *testing.T) {
	_, cs := connect(t, nil, nil, nil)
	for _, tc := range []struct {
		tool, args, want string
	}{
		{ToolFinish, `{}`, "argument id"},
		{ToolFinish, `{"id":7}`, "argument id"},
		{ToolFinish, `{"id":"a-1","result":3}`, "argument result"},
		{ToolFinish, `{"id":"a-1"}`, "unknown action"},
		{ToolRelease, `{"id":"a-1"}`, "unknown action"},
		{ToolPost, `{"body":"b"}`, "argument title"},
		{ToolPost, `{"title":"t","body":"b","to":5}`, "argument to"},
		{ToolPost, `{"title":"t","body":"b"}`, "does not hold actions"},
		{ToolList, `{"since":1}`, "argument since"},
		{ToolList, `{"since":"zz"}`, "argument since"},
		{ToolWhoami, `{"x":1}`, "argument x"},
	} {
		res := call(t, cs, tc.tool, json.RawMessage(tc.args))
		require.Contains(t, said(t, res), tc.want, "%s %s", tc.tool, tc.args)
	}
}

func TestSession_DepartRefusesLaterCalls(t *testing.T) {
	src := &actionstest.Source{}
	s, cs := connect(t, src, nil, nil)
	id := s.Identity()
	require.NoError(t, s.Depart(t.Context()))
	require.NoError(t, s.Depart(t.Context()), "Depart is idempotent")
	require.Equal(t, []identity.ID{id}, src.Departed())
	res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
	require.Contains(t, said(t, res), "departed")
	_, err := s.Retire(t.Context(), RetireRequest{})
	require.ErrorIs(t, err, actions.ErrDeparted)
}

func TestServer_SourceFailedToOpen(t *testing.T) {
	p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
		return nil, errors.New("open board /tmp/b.db: file is not a database; move it aside")
	})
	cs := connectPending(t, p, nil, nil)
	// The handshake and the tool list do not wait for the source...
	_, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	// ...and every tool says why bee could not start.
	res := call(t, cs, ToolWhoami, nil)
	require.Contains(t, said(t, res), "file is not a database")
	_, err = p.Retire(t.Context(), RetireRequest{})
	require.ErrorContains(t, err, "file is not a database")
}

func TestPending_WaitHonoursContext(t *testing.T) {
	release := make(chan struct{})
	p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
		<-release
		return actions.NoActions{}, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	s, err := p.Wait(t.Context())
	require.NoError(t, err)
	require.Regexp(t, `^agent:x#`, string(s.Identity()))
}

func TestWait_BoundCountsTheBoardOpening(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		p := Start(t.Context(), Config{Agent: "x"}, func() (actions.Source, error) {
			<-release // a board that takes longer to open than the wait may last
			return actions.NoActions{}, nil
		})
		cs := connectPending(t, p, nil, nil)
		start := time.Now()
		res := call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})
		require.Equal(t, time.Second, time.Since(start), "a wait returns at its bound")
		require.Contains(t, said(t, res), "still opening")
	})
}

// The model reads structured content only: an empty wait says what to do
// next, and every kind of refusal says what was wrong and what to do, in
// fields the output schema describes (checkAnswer, which every call here
// goes through, holds each answer to that).
func TestGuidance_EmptyWaitAndEveryRefusal(t *testing.T) {
	t.Parallel()
	b := openBoard(t)
	s, cs := connect(t, b, nil, nil)
	empty := structured[waitOut](t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1}))
	require.Contains(t, empty.Next, "end your turn")
	require.Contains(t, empty.Next, "bee wakes this session")

	theirs, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: "open, not yours"})
	require.NoError(t, err)
	for _, tc := range []struct {
		tool, args string
		next       string // what the refusal tells the model to do
	}{
		{ToolWait, `{"timeoutSeconds":"30"}`, "again with argument timeoutSeconds"},
		{ToolWait, `{"cursor":"not-a-cursor"}`, "without a cursor"},
		{ToolList, `{"since":5}`, "argument since"},
		{ToolWhoami, `{"x":1}`, "argument x"},
		{ToolPost, `{"body":"b"}`, "argument title"},
		{ToolPost, `{"title":"t","body":"b","to":"agent:nobody#00000000"}`, "live identities"},
		{ToolFinish, `{"id":"a-999"}`, "Check the id"},
		{ToolRelease, `{"id":"` + theirs.ID + `"}`, "Only the identity that holds"},
		{ToolFail, `{"id":"` + theirs.ID + `","reason":" "}`, "argument reason"},
		{ToolCancel, `{"id":"a-999"}`, "Check the id"},
		{ToolAwait, `{"ids":[]}`, "argument ids"},
	} {
		res := call(t, cs, tc.tool, json.RawMessage(tc.args))
		require.Contains(t, said(t, res), tc.next, "%s %s", tc.tool, tc.args)
	}
	require.NoError(t, s.Depart(t.Context()))
	require.Contains(t, said(t, call(t, cs, ToolWait, map[string]any{"timeoutSeconds": 1})), "a new bridge")
}
