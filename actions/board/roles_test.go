package board

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// Worker roles: the test binary re-executed with roleEnv set runs one of
// these instead of the tests. Each talks over lines: commands on stdin,
// reports on stdout; closing stdin asks it to finish.
//
// Environment of a role:
//
//	BEE_BOARD_TEST_PATH     the board file
//	BEE_BOARD_TEST_LEASE    Options.Lease in ms (0: default)
//	BEE_BOARD_TEST_SAFETY   Options.SafetyPoll in ms (0: default)
//	BEE_BOARD_TEST_NOLOCK   "1": Options.noWriteLock
//	BEE_BOARD_TEST_WAITERS  claimer: concurrent identities (default 1)
//	BEE_BOARD_TEST_MS       rate: how long to claim, in ms
//	BEE_BOARD_TEST_AGENT    waiter: its agent name (default "waiter")
const (
	envPath    = "BEE_BOARD_TEST_PATH"
	envLease   = "BEE_BOARD_TEST_LEASE"
	envSafety  = "BEE_BOARD_TEST_SAFETY"
	envNoLock  = "BEE_BOARD_TEST_NOLOCK"
	envWaiters = "BEE_BOARD_TEST_WAITERS"
	envMS      = "BEE_BOARD_TEST_MS"
	envAgent   = "BEE_BOARD_TEST_AGENT"
)

func envMillis(name string) time.Duration {
	n, _ := strconv.Atoi(os.Getenv(name))
	return time.Duration(n) * time.Millisecond
}

// roleOut serializes a role's report lines.
type roleOut struct{ mu sync.Mutex }

func (o *roleOut) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func runRole(role string) error {
	out := &roleOut{}
	opts := &Options{
		Lease:       envMillis(envLease),
		SafetyPoll:  envMillis(envSafety),
		noWriteLock: os.Getenv(envNoLock) == "1",
	}
	if role == "waiter" {
		opts.beforeSleep = func() { out.say("sleeping") }
	}
	if setup := roleOptions[role]; setup != nil {
		setup(opts, out)
	}
	b, err := Open(os.Getenv(envPath), opts)
	if err != nil {
		return err
	}
	defer b.Close()

	// Closing stdin ends the role; stdin also carries commands.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmds := make(chan string)
	go func() {
		defer cancel()
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
	}()

	switch role {
	case "claimer":
		return roleClaimer(ctx, b, out)
	case "holder":
		return roleHolder(ctx, b, out)
	case "poster":
		return rolePoster(ctx, b, out, cmds)
	case "waiter":
		return roleWaiter(ctx, b, out)
	case "rate":
		return roleRate(ctx, b, out, cmds)
	case "worker":
		return roleWorker(ctx, b, out, cmds)
	}
	if run := moreRoles[role]; run != nil {
		return run(ctx, b, out, cmds)
	}
	return fmt.Errorf("unknown role %q", role)
}

// roleClaimer runs BEE_BOARD_TEST_WAITERS identities, each claiming and
// finishing as fast as it can; it reports "got <id> <identity>" per claim
// and "ready" once all have joined, and departs them all at the end.
func roleClaimer(ctx context.Context, b *Board, out *roleOut) error {
	n, _ := strconv.Atoi(os.Getenv(envWaiters))
	n = max(n, 1)
	ids := make([]identity.ID, n)
	for i := range ids {
		id, err := identity.Mint("claimer")
		if err != nil {
			return err
		}
		if err := b.Join(ctx, actions.Member{ID: id, PID: os.Getpid()}); err != nil {
			return err
		}
		ids[i] = id
	}
	out.say("ready")
	errs := make(chan error, n)
	for _, who := range ids {
		go func() {
			errs <- func() error {
				cursor := actions.Cursor("")
				for {
					p, err := b.Next(ctx, who, cursor, time.Second)
					if ctx.Err() != nil {
						return nil
					}
					if err != nil {
						return err
					}
					cursor = p.Cursor
					for _, r := range p.Records {
						out.say("got %s %s", r.ID, who)
						if _, err := b.Finish(ctx, who, r.ID, string(who)); err != nil {
							return fmt.Errorf("finish %s: %w", r.ID, err)
						}
					}
				}
			}()
		}()
	}
	var first error
	for range ids {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for _, who := range ids {
		if err := b.Depart(context.Background(), who); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// roleHolder claims one action, reports "claimed <id> <identity>", and
// holds it until killed.
func roleHolder(ctx context.Context, b *Board, out *roleOut) error {
	who, err := identity.Mint("holder")
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	p, err := b.Next(ctx, who, "", 10*time.Second)
	if err != nil {
		return err
	}
	if len(p.Records) == 0 {
		return errors.New("nothing to claim")
	}
	out.say("claimed %s %s", p.Records[0].ID, who)
	<-ctx.Done()
	return nil
}

// rolePoster posts one action per "post <title>" line; a title of "now"
// becomes "t0=<unix ns just before the post>", for measuring latency.
func rolePoster(ctx context.Context, b *Board, out *roleOut, cmds <-chan string) error {
	out.say("ready")
	for cmd := range cmds {
		title, ok := strings.CutPrefix(cmd, "post ")
		if !ok {
			return fmt.Errorf("unknown command %q", cmd)
		}
		if title == "now" {
			title = "t0=" + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
		r, err := b.Post(ctx, "user:poster", actions.Draft{Title: title})
		if err != nil {
			return err
		}
		out.say("posted %s", r.ID)
	}
	return nil
}

// roleWaiter waits for actions with long timeouts, reporting "sleeping"
// whenever it is about to sleep and "got <id> <unix ns>" per claim.
func roleWaiter(ctx context.Context, b *Board, out *roleOut) error {
	name := os.Getenv(envAgent)
	if name == "" {
		name = "waiter"
	}
	who, err := identity.Mint(name)
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	defer b.Depart(context.Background(), who)
	for {
		p, err := b.Next(ctx, who, "", time.Minute)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range p.Records {
			out.say("got %s %d", r.ID, time.Now().UnixNano())
			if _, err := b.Finish(ctx, who, r.ID, ""); err != nil {
				if ctx.Err() != nil { // the test ended it as it finished
					return nil
				}
				return err
			}
		}
	}
}

// roleRate waits for a "go" line, then claims (without finishing) as fast
// as it can for BEE_BOARD_TEST_MS and reports "count <claims>".
func roleRate(ctx context.Context, b *Board, out *roleOut, cmds <-chan string) error {
	who, err := identity.Mint("rate")
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	defer b.Depart(context.Background(), who)
	out.say("ready")
	if cmd := <-cmds; cmd != "go" {
		return fmt.Errorf("want go, got %q", cmd)
	}
	end := time.Now().Add(envMillis(envMS))
	count := 0
	for time.Now().Before(end) {
		p, err := b.Next(ctx, who, "", 100*time.Millisecond)
		if err != nil {
			return err
		}
		count += len(p.Records)
	}
	out.say("count %d", count)
	return nil
}

// A proc is a role running in a child process.
type proc struct {
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

// startProc starts role in a child process on the board at path. The child
// is killed, if still running, when the test ends.
func startProc(tb testing.TB, role, path string, env ...string) *proc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, envPath+"="+path)
	// Under -race a child would otherwise sleep 1 s at exit, waiting for
	// other goroutines' race reports.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	p := &proc{tb: tb, cmd: cmd, lines: make(chan string, 1<<16), read: make(chan struct{}), stderr: &lockedBuffer{}, exited: make(chan struct{})}
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

// expect returns the next stdout line starting with prefix, skipping
// others, and fails the test if none comes within timeout.
func (p *proc) expect(prefix string, timeout time.Duration) string {
	p.tb.Helper()
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

func (p *proc) send(line string) {
	p.tb.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.tb.Fatal(err)
	}
}

// finish closes the child's stdin and waits for it to exit cleanly,
// returning the stdout lines it had not been asked for.
func (p *proc) finish(timeout time.Duration) []string {
	p.tb.Helper()
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
