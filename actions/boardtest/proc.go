package boardtest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/internal/testtime"
)

// A Proc is a role (see RunRole) running in a child process: the test
// binary re-executed, as os/exec's tests do. The child is killed, if still
// running, when the test ends, and its stderr is logged if the test failed.
type Proc struct {
	tb     testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string   // stdout, line by line; closed at EOF
	read   chan struct{} // closed when stdout has been read to the end
	stderr *lockedBuffer
	exited chan struct{}
	err    error // set before exited closes
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartProc starts role in a child process on the board at location, with
// env (NAME=value, such as EnvLease) added to its environment, and the
// test's time factor (testtime.Env), so that the child's waits keep step
// with the test's bounds.
func StartProc(tb testing.TB, role, location string, env ...string) *Proc {
	tb.Helper()
	return StartProcUnder(tb, nil, role, location, env...)
}

// StartProcUnder is StartProc with the test binary run under the command
// line wrap (such as ip netns exec NAME); nil runs it directly.
func StartProcUnder(tb testing.TB, wrap []string, role, location string, env ...string) *Proc {
	tb.Helper()
	args := append(append([]string{}, wrap...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), EnvRole+"="+role, EnvLocation+"="+location)
	// Under -race a child would otherwise sleep 1 s at exit, waiting for
	// other goroutines' race reports.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, testtime.Env())
	cmd.Env = append(cmd.Env, env...)
	p := &Proc{tb: tb, cmd: cmd, lines: make(chan string, 1<<16), read: make(chan struct{}), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer close(p.read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		<-p.read // Wait closes stdout; read it all first
		p.err = cmd.Wait()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if tb.Failed() {
			tb.Logf("%s (pid %d) stderr:\n%s", role, cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// Pid returns the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Expect returns the next stdout line starting with prefix, skipping
// others, and fails the test if none comes within timeout (a bound,
// stretched by testtime.Factor).
func (p *Proc) Expect(prefix string, timeout time.Duration) string {
	p.tb.Helper()
	timeout = testtime.Bound(timeout)
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				p.tb.Fatalf("child exited (%v) before saying %q; stderr:\n%s", p.err, prefix, p.stderr.String())
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-t.C:
			p.tb.Fatalf("child did not say %q within %v; stderr:\n%s", prefix, timeout, p.stderr.String())
		}
	}
}

// Send writes line to the child's stdin.
func (p *Proc) Send(line string) {
	p.tb.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.tb.Fatal(err)
	}
}

// Finish closes the child's stdin and waits for it to exit cleanly,
// returning the stdout lines it had not been asked for; timeout is
// stretched as in Expect.
func (p *Proc) Finish(timeout time.Duration) []string {
	p.tb.Helper()
	timeout = testtime.Bound(timeout)
	_ = p.stdin.Close()
	var rest []string
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				if p.err != nil {
					p.tb.Fatalf("child failed: %v; stderr:\n%s", p.err, p.stderr.String())
				}
				return rest
			}
			rest = append(rest, line)
		case <-t.C:
			p.tb.Fatalf("child did not exit within %v; stderr:\n%s", timeout, p.stderr.String())
		}
	}
}

// FinishFailing closes the child's stdin and waits for it to exit with a
// failure, returning its stderr's lines; timeout is stretched as in
// Expect.
func (p *Proc) FinishFailing(timeout time.Duration) []string {
	p.tb.Helper()
	timeout = testtime.Bound(timeout)
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.tb.Fatalf("child did not exit within %v; stderr:\n%s", timeout, p.stderr.String())
	}
	if p.err == nil {
		p.tb.Fatalf("child exited cleanly; want a failure")
	}
	return strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
}

// Kill SIGKILLs the child, waits for it to be gone and returns the stdout
// lines it had said that no Expect took.
func (p *Proc) Kill() []string {
	p.tb.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.tb.Fatalf("kill %s: %v", p.cmd.Path, err)
	}
	<-p.exited
	var rest []string
	for line := range p.lines {
		rest = append(rest, line)
	}
	return rest
}
