package boardpage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/internal/testtime"
)

// TestMain closes the shared browser before it looks for leaked
// goroutines, so that the leak check sees only what the
// tests left behind.
func TestMain(m *testing.M) {
	code := m.Run()
	shared.close()
	if code == 0 {
		if err := testtime.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// chromiumEnv names a Chromium (or Chrome) binary to use instead of the
// one on $PATH.
const chromiumEnv = "BEE_CHROMIUM"

// installHint says how to get what the browser tests need.
const installHint = "the board page's tests drive a real headless Chromium: install it with " +
	"`apt-get update && apt-get install -y chromium` (as .ci/run does), or point $" + chromiumEnv + " at a Chromium or Chrome binary"

// shared is what the tests of one run share: one browser, started on
// first use.
var shared testShared

type testShared struct {
	browserOnce sync.Once
	browser     context.Context // a chromedp context with a running browser
	cancelAlloc context.CancelFunc
	cancelTab   context.CancelFunc
	browserErr  error
	profile     string // the browser's fresh --user-data-dir

}

// close ends the browser and removes the run's files.
func (sh *testShared) close() {
	if sh.cancelTab != nil {
		ctx, cancel := context.WithTimeout(sh.browser, 10*time.Second)
		_ = chromedp.Cancel(ctx) // closes the browser gracefully
		cancel()
		sh.cancelTab()
		sh.cancelAlloc()
	}
	if sh.profile != "" {
		_ = os.RemoveAll(sh.profile)
	}
}

// chromiumPath finds the browser, or says how to install it.
func chromiumPath() (string, error) {
	if p := os.Getenv(chromiumEnv); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on $PATH: " + installHint)
}

// startBrowser starts the run's one headless Chromium.
func startBrowser() error {
	path, err := chromiumPath()
	if err != nil {
		return err
	}
	if shared.profile, err = os.MkdirTemp("", "bee-chromium-"); err != nil {
		return err
	}
	var out bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(shared.profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1400, 900),
		chromedp.CombinedOutput(&lockedWriter{w: &out}),
	)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx
		cancelTab()
		cancelAlloc()
		return fmt.Errorf("start %s: %w (its output: %s); %s", path, err, strings.TrimSpace(out.String()), installHint)
	}
	shared.browser, shared.cancelAlloc, shared.cancelTab = ctx, cancelAlloc, cancelTab
	return nil
}

// lockedWriter lets the browser's output goroutines share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

// String returns what was written.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 64<<10 {
		return len(p), nil
	}
	return l.w.Write(p)
}

// newTab returns a chromedp context for a fresh tab in a browser context
// of its own (its own cookies), closed when the test ends. A missing
// Chromium fails the test, saying how to install it. Under -short it
// skips the test: the browser tests are not the inner loop.
func newTab(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a headless Chromium: skipped under -short")
	}
	shared.browserOnce.Do(func() { shared.browserErr = startBrowser() })
	require.NoError(t, shared.browserErr)
	ctx, cancel := chromedp.NewContext(shared.browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "open a tab")
	return ctx
}

// within runs steps in the tab, one after another, bounded by d
// (stretched by testtime.Factor). A step that failed because the node it
// had found was replaced before it acted (the page's live update swapped
// that part) runs again: such a step fails before it clicks or types.
func within(t *testing.T, tab context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, testtime.Bound(d))
	defer cancel()
	for _, step := range steps {
		err := chromedp.Do(ctx, step)
		for try := 1; err != nil && try < 5 && strings.Contains(err.Error(), staleNode) && ctx.Err() == nil; try++ {
			err = chromedp.Do(ctx, step)
		}
		require.NoError(t, err)
	}
}

// staleNode is how the DevTools protocol refuses a node id whose node has
// left the document.
const staleNode = "Could not find node with given id"

// eval evaluates a JavaScript expression in the tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, testtime.Bound(10*time.Second))
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// beeBinary returns bee, built once for every test that runs it
// (testbin): the browser tests run the real command, as a person would.
// It skips t under -short.
func beeBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(testbin.Dir(t), "bee")
}

// beeCmd returns bee with args, on the board at path, as user:tester.
func beeCmd(t *testing.T, path string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(beeBinary(t), args...)
	cmd.Env = append(os.Environ(), "BEE_BOARD="+path, "USER=tester", "LOGNAME=tester")
	return cmd
}

// bee runs a bee command to its end and returns its stdout.
func bee(t *testing.T, path string, args ...string) string {
	t.Helper()
	cmd := beeCmd(t, path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "bee %v: %s", args, stderr.String())
	return string(out)
}

// beeList returns every action `bee list --all --json` reports.
func beeList(t *testing.T, path string) []actions.Record {
	t.Helper()
	var recs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "list", "--all", "--json")), &recs))
	return recs
}

// serve starts `bee serve` on the board at path and returns the sign-in
// link it prints. The test ends it with SIGINT and requires a clean exit
// (130, as for every interrupted bee command).
func serve(t *testing.T, path string) string {
	t.Helper()
	cmd := beeCmd(t, path, "serve")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedWriter
	stderr.w = &bytes.Buffer{}
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // drain: bee serve prints one line, but never block it
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			// bee exits 130 when interrupted, as every bee command does.
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "bee serve's exit; stderr: %s", stderr.String())
			require.Equal(t, 130, ee.ExitCode(), "bee serve's exit; stderr: %s", stderr.String())
		case <-time.After(testtime.Bound(15 * time.Second)):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("bee serve did not end within 15 s of SIGINT; stderr: %s", stderr.String())
		}
	})
	select {
	case line, ok := <-lines:
		require.True(t, ok, "bee serve printed no link; stderr: %s", stderr.String())
		require.Contains(t, line, "/login?token=")
		return line
	case <-time.After(testtime.Bound(30 * time.Second)):
		t.Fatalf("bee serve printed no link within 30 s; stderr: %s", stderr.String())
	}
	return ""
}

// signIn opens the sign-in link in the tab and waits for the board.
func signIn(t *testing.T, tab context.Context, link string) {
	t.Helper()
	within(t, tab, 20*time.Second,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#actions")),
	)
	waitLive(t, tab)
}

// waitLive waits until the page's event stream is connected.
func waitLive(t *testing.T, tab context.Context) {
	t.Helper()
	within(t, tab, 10*time.Second, chromedp.Poll[chromedp.Void](`document.getElementById('status').classList.contains('on')`,
		chromedp.WithPollingInterval(20*time.Millisecond)))
}

// testContext bounds one chromedp call on tab by d (stretched by
// testtime.Factor).
func testContext(tab context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(tab, testtime.Bound(d))
}
