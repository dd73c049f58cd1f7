package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/testio"
	"github.com/tractat-us/bee/internal/testtime"
)

func TestMain(m *testing.M) {
	if os.Getenv(runAsEnv) == "wait-for-stdin" {
		// Say so once running: until then (under -race the runtime may
		// exec itself again) /proc shows no command line.
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	testtime.VerifyTestMain(m)
}

// proc is an in-process Run with pipes for stdin and stdout.
type proc struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan string
	sigs   chan os.Signal
	done   chan error
	board  string
	logBuf *testio.Buffer
	logged *records
	// settled counts Config.Settled's runs.
	settled atomic.Int32
}

func startBridge(t *testing.T) *proc {
	t.Helper()
	return startBridgeOn(t, t.TempDir())
}

// startBridgeOn starts a bridge whose board file is dir/board.db, and whose
// run directory is dir/run.
func startBridgeOn(t *testing.T, dir string) *proc {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := &proc{t: t, in: inW, lines: make(chan string, 100), sigs: make(chan os.Signal, 4), done: make(chan error, 1),
		board: filepath.Join(dir, "board.db"), logBuf: &testio.Buffer{}, logged: &records{}}
	go func() {
		defer close(b.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
	}()
	go func() {
		b.done <- Run(context.Background(), Config{
			Agent:      "lifecycle",
			BoardPath:  b.board,
			RunDir:     filepath.Join(dir, "run"),
			Stdin:      inR,
			Stdout:     outW,
			Signals:    b.sigs,
			WatchEvery: 50 * time.Millisecond,
			Logger:     slog.New(teeHandler{slogTo(b.logBuf).Handler(), b.logged}),
			Settled:    func() { b.settled.Add(1) },
		})
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		for range b.lines {
		}
	})
	return b
}

func (b *proc) send(line string) {
	b.t.Helper()
	_, err := io.WriteString(b.in, line+"\n")
	require.NoError(b.t, err)
}

// await returns the first stdout line holding want.
func (b *proc) await(want string) string {
	b.t.Helper()
	timeout := time.After(testtime.Bound(10 * time.Second))
	for {
		select {
		case l, ok := <-b.lines:
			require.True(b.t, ok, "stdout closed before %q\nlog:\n%s", want, b.logBuf)
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			b.t.Fatalf("no %q on stdout\nlog:\n%s", want, b.logBuf)
		}
	}
}

func (b *proc) ended() {
	b.t.Helper()
	select {
	case err := <-b.done:
		require.NoError(b.t, err)
	case <-time.After(testtime.Bound(5 * time.Second)):
		b.t.Fatalf("Run did not return\nlog:\n%s", b.logBuf)
	}
}

func (b *proc) claimOne() actions.Record {
	b.t.Helper()
	b.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	b.await(`"id":1`)
	b.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	b.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bee_post_action","arguments":{"title":"t","body":"b"}}}`)
	b.await(`"id":2`)
	b.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bee_wait_action","arguments":{"timeoutSeconds":5}}}`)
	var resp struct {
		Result struct {
			StructuredContent actions.Page `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(b.t, json.Unmarshal([]byte(b.await(`"id":3`)), &resp))
	require.Len(b.t, resp.Result.StructuredContent.Records, 1)
	return resp.Result.StructuredContent.Records[0]
}

func (b *proc) state(id string) actions.State {
	b.t.Helper()
	bd, err := board.Open(b.board, nil)
	require.NoError(b.t, err)
	defer bd.Close()
	r, err := bd.Get(context.Background(), id)
	require.NoError(b.t, err)
	return r.State
}

// Each end leaves no goroutine behind (TestMain checks) and gives the claim
// back.
func TestRun_Ends(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(b *proc)
	}{
		{"stdin closed", func(b *proc) { b.in.Close() }},
		{"signal", func(b *proc) { b.sigs <- syscall.SIGINT }},
		{"two signals", func(b *proc) { b.sigs <- syscall.SIGINT; b.sigs <- syscall.SIGTERM }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBridge(t)
			rec := b.claimOne()
			// A wait in flight when the end comes.
			b.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bee_wait_action","arguments":{"timeoutSeconds":60}}}`)
			tc.end(b)
			b.ended()
			require.Equal(t, actions.Open, b.state(rec.ID))
			require.True(t, b.logged.has(slog.LevelInfo, logkey.Path, b.board), "the bridge made this board and says where")
		})
	}
}

func TestRun_SettlesOnceStarted(t *testing.T) {
	b := startBridge(t)
	b.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	b.await(`"id":1`)
	b.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bee_whoami"}}`)
	require.NotContains(t, b.await(`"id":2`), `"isError":true`)
	// The session is set up, so the bridge has settled, once.
	require.Eventually(t, func() bool { return b.settled.Load() > 0 }, testtime.Bound(5*time.Second), 5*time.Millisecond)
	b.sigs <- syscall.SIGTERM
	b.ended()
	require.Equal(t, int32(1), b.settled.Load())
}

func TestRun_BoardUnusable(t *testing.T) {
	// The file is there before the bridge starts: written after, it could
	// replace a board the bridge had already opened.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "board.db"), []byte("this is not a database, it is a note"), 0o600))
	b := startBridgeOn(t, dir)
	// The handshake still works, and a tool says what is wrong.
	b.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	b.await(`"id":1`)
	b.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bee_whoami"}}`)
	line := b.await(`"id":2`)
	require.Contains(t, line, `"isError":true`)
	require.Contains(t, line, b.board)
	b.sigs <- syscall.SIGTERM
	b.ended()
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records keeps the attributes of every log record, by level, so that a
// test can ask what was logged by key and value rather than by wording.
type records struct {
	mu    sync.Mutex
	attrs []map[string]string
	level []slog.Level
}

func (r *records) add(l slog.Level, attrs map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attrs = append(r.attrs, attrs)
	r.level = append(r.level, l)
}

// has reports whether a record at level l carried key with value v.
func (r *records) has(l slog.Level, key, v string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.attrs {
		if r.level[i] == l && a[key] == v {
			return true
		}
	}
	return false
}

// teeHandler hands each record to h and keeps its attributes in r.
type teeHandler struct {
	h slog.Handler
	r *records
}

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return t.h.Enabled(ctx, l) }

func (t teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	t.r.add(rec.Level, attrs)
	return t.h.Handle(ctx, rec)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler { return teeHandler{t.h.WithAttrs(as), t.r} }
func (t teeHandler) WithGroup(name string) slog.Handler    { return teeHandler{t.h.WithGroup(name), t.r} }

// A cancel that arrives after the wait's answer was written (Esc pressed as
// the claim came back) means Claude Code discards the answer: the claim
// goes back to the board rather than sitting with a live identity whose
// model never heard of it.
func TestRun_LateCancelGivesTheClaimBack(t *testing.T) {
	b := startBridge(t)
	rec := b.claimOne() // the answer to id 3 has been read
	// The cancel goes at once: it counts only within the late-cancel
	// window (1 s) after the answer was written, and opening the board to
	// look first can take longer than that on a loaded machine.
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"AbortError: user-cancel"}}`)
	require.Equal(t, actions.Claimed, rec.State, "the answer handed over a claim")
	if !assert.Eventually(t, func() bool { return b.state(rec.ID) == actions.Open }, testtime.Bound(5*time.Second), 10*time.Millisecond) {
		t.Fatalf("the claim was not given back\nlog:\n%s", b.logBuf)
	}
	b.sigs <- syscall.SIGTERM
	b.ended()
}

// Dropping a list's answer (its call cancelled, late or not) gives nothing
// back: a list shows claims, it does not hand any over.
func TestRun_CancelledListReleasesNothing(t *testing.T) {
	b := startBridge(t)
	rec := b.claimOne()
	b.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bee_list_actions"}}`)
	b.await(`"id":7`)
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"AbortError: user-cancel"}}`)
	// A ping after the cancel: once it is answered the cancel has been read.
	b.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	b.await(`"id":8`)
	require.Equal(t, actions.Claimed, b.state(rec.ID))
	b.sigs <- syscall.SIGTERM
	b.ended()
}

// However stuck the board (another process holds its write lock), the
// cleanup that follows a signal ends within Claude Code's grace: SIGKILL
// comes 500 ms after SIGINT. Each step is bounded (departBound, stepBound,
// closeBound: 350 ms in all).
func TestRun_CleanupBoundedOnAStuckBoard(t *testing.T) {
	b := startBridge(t)
	b.claimOne()
	lock, err := os.OpenFile(b.board+"-lock", os.O_RDWR, 0)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_EX))
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	start := time.Now()
	b.sigs <- syscall.SIGINT
	b.ended()
	require.Less(t, time.Since(start), testtime.Bound(500*time.Millisecond))
}
