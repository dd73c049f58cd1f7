// Package bridgetest drives a bee-mcp process the way Claude Code does: raw
// JSON-RPC lines on its stdin, every stdout line collected and checked, and
// its stderr kept for failure messages. Tests use it to hold the bridge to
// "stdout is the protocol" from the outside, with a real process.
package bridgetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tractat-us/bee/internal/testtime"
)

// A Message is one JSON-RPC line the bridge wrote.
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
	Raw string `json:"-"`
	At  time.Time
}

// A Proc is a running bridge.
type Proc struct {
	t     testing.TB
	Cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	lines   []Message
	bad     []string // stdout lines that are not JSON-RPC
	changed chan struct{}

	errMu  sync.Mutex // guards stderr, apart from mu so that Find's callbacks may read it
	stderr bytes.Buffer

	exited  chan struct{}
	waitErr error
}

// Start runs cmd with its stdin, stdout and stderr taken over, and ends it
// with SIGKILL at test cleanup if it is still running. At cleanup it also
// fails the test if any stdout line was not a JSON-RPC message.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{t: t, Cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = lockedWriter{&p.errMu, &p.stderr}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			p.add(sc.Text())
		}
	}()
	go func() {
		<-readDone
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.bad) > 0 {
			t.Errorf("bridge wrote %d stdout line(s) that are not JSON-RPC, first: %q", len(p.bad), p.bad[0])
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *Proc) add(line string) {
	var m Message
	err := json.Unmarshal([]byte(line), &m)
	var v struct {
		JSONRPC string `json:"jsonrpc"`
	}
	_ = json.Unmarshal([]byte(line), &v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || v.JSONRPC != "2.0" || (m.Method == "" && m.ID == nil) {
		p.bad = append(p.bad, line)
	} else {
		m.Raw = line
		m.At = time.Now()
		p.lines = append(p.lines, m)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Send writes one line to the bridge's stdin.
func (p *Proc) Send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to bridge stdin: %v", err)
	}
}

// Call sends a request with the given id, method and params (any value
// that marshals to JSON; nil for none).
func (p *Proc) Call(id any, method string, params any) {
	p.t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, err := json.Marshal(req)
	if err != nil {
		p.t.Fatal(err)
	}
	p.Send(string(b))
}

// Notify sends a notification.
func (p *Proc) Notify(method string, params any) {
	p.t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	p.Send(string(b))
}

// Initialize performs the initialize handshake (protocol 2025-11-25).
func (p *Proc) Initialize() Message {
	p.t.Helper()
	p.Call("init", "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "bridgetest", "version": "0"},
	})
	m := p.Await("init", 10*time.Second)
	p.Notify("notifications/initialized", nil)
	return m
}

// CloseStdin closes the bridge's stdin.
func (p *Proc) CloseStdin() { _ = p.stdin.Close() }

// Signal sends sig to the bridge, unless it has already exited (a second
// signal in a shutdown sequence may find it gone, which is the point).
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Messages returns every JSON-RPC line written so far.
func (p *Proc) Messages() []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Message(nil), p.lines...)
}

// Stderr returns what the bridge has logged so far.
func (p *Proc) Stderr() string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.stderr.String()
}

// idKey renders a JSON id the way the bridge echoes it.
func idKey(id any) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// Find returns the first message matching f, waiting up to d for it. d
// is a bound, stretched by testtime.Factor.
func (p *Proc) Find(d time.Duration, what string, f func(Message) bool) Message {
	p.t.Helper()
	d = testtime.Bound(d)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		for _, m := range p.lines {
			if f(m) {
				p.mu.Unlock()
				return m
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			p.mu.Lock()
			for _, m := range p.lines {
				if f(m) {
					p.mu.Unlock()
					return m
				}
			}
			p.mu.Unlock()
			p.t.Fatalf("bridge exited before %s\nstderr:\n%s", what, p.Stderr())
		case <-deadline.C:
			p.t.Fatalf("no %s within %v\nstdout:\n%s\nstderr:\n%s", what, d, p.dump(), p.Stderr())
		}
	}
}

// Await waits up to d (stretched, as in Find) for the response to id.
func (p *Proc) Await(id any, d time.Duration) Message {
	p.t.Helper()
	key := idKey(id)
	return p.Find(d, "response to id "+key, func(m Message) bool {
		return m.Method == "" && string(m.ID) == key
	})
}

// Responses returns the responses to id written so far.
func (p *Proc) Responses(id any) []Message {
	key := idKey(id)
	var out []Message
	for _, m := range p.Messages() {
		if m.Method == "" && string(m.ID) == key {
			out = append(out, m)
		}
	}
	return out
}

func (p *Proc) dump() string {
	var b strings.Builder
	for _, m := range p.Messages() {
		b.WriteString(m.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// Exited returns a channel closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// WaitExit waits up to d (a bound, stretched by testtime.Factor) for the
// process to exit and returns its exit code, or fails the test.
func (p *Proc) WaitExit(d time.Duration) int {
	p.t.Helper()
	d = testtime.Bound(d)
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("bridge did not exit within %v\nstderr:\n%s", d, p.Stderr())
	}
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.t.Fatalf("bridge was killed by %v instead of exiting\nstderr:\n%s", ws.Signal(), p.Stderr())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// ToolCall is a tools/call request's params.
func ToolCall(name string, args any, progressToken any) map[string]any {
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	if progressToken != nil {
		params["_meta"] = map[string]any{"progressToken": progressToken}
	}
	return params
}

// ToolResult decodes a tools/call response's result.
type ToolResult struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Content           []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// Text joins the result's text content.
func (r ToolResult) Text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// DecodeResult decodes m as a tool result or fails the test.
func (p *Proc) DecodeResult(m Message) ToolResult {
	p.t.Helper()
	if m.Error != nil {
		p.t.Fatalf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
	}
	var r ToolResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		p.t.Fatalf("decode tool result %s: %v", m.Raw, err)
	}
	return r
}

// String describes the process for failure messages.
func (p *Proc) String() string { return fmt.Sprintf("bridge pid %d", p.Cmd.Process.Pid) }
