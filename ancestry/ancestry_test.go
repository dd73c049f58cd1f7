package ancestry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runAsEnv makes the test binary impersonate a helper (see TestMain).
const runAsEnv = "BEE_TEST_RUN_AS"

func TestMain(m *testing.M) {
	switch os.Getenv(runAsEnv) {
	case "":
		os.Exit(m.Run())
	case "claude":
		os.Exit(runAsClaude())
	case "claude-via-sh":
		// The hook's real chain: hook <- sh -c <- claude. The trailing
		// command keeps sh from exec'ing the child in its own place.
		os.Exit(runAsClaude("/bin/sh", "-c", `"$0"; exit $?`))
	case "print":
		os.Exit(runAsPrinter())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", runAsEnv, os.Getenv(runAsEnv))
		os.Exit(2)
	}
}

// runAsClaude is the body of the helper that the real-process tests exec
// under the name claude (or claude.exe, codex, node...): it runs the real
// test binary as a child that prints AgentPID, through prefix (a shell)
// when given, and passes the child's stdout through.
func runAsClaude(prefix ...string) int {
	exe, err := os.Executable() // the real file, so the child's comm is not claude
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	args := append(prefix, exe)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = helperEnv("print")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// helperEnv is the environment for a re-run of the test binary as runAs.
// Under -race a binary sleeps 1 s at exit unless GORACE says otherwise.
func helperEnv(runAs string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(os.Environ(), runAsEnv+"="+runAs, "GORACE="+gorace)
}

// printed is what the "print" helper writes: AgentPID's result.
// ParentComm is the Comm that Chain gives the child's parent (the helper).
type printed struct {
	PID        int
	OK         bool
	Err        string
	ParentComm string
}

func runAsPrinter() int {
	pid, ok, err := AgentPID(context.Background())
	out := printed{PID: pid, OK: ok}
	if err != nil {
		out.Err = err.Error()
	}
	if chain, err := Chain(context.Background(), os.Getpid()); err == nil && len(chain) > 0 {
		out.ParentComm = chain[0].Comm
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

func TestNearest(t *testing.T) {
	t.Parallel()
	gemini := []string{"node", "/usr/lib/node_modules/@google/gemini-cli/bundle/gemini.js"}
	for _, tc := range []struct {
		name   string
		chain  []Proc
		wantID int
		wantOK bool
	}{
		{name: "empty", chain: nil},
		{name: "none", chain: []Proc{{PID: 10, PPID: 9, Comm: "sh"}, {PID: 9, PPID: 1, Comm: "bash"}, {PID: 1, Comm: "init"}}},
		{name: "parent", chain: []Proc{{PID: 10, PPID: 9, Comm: "claude"}, {PID: 9, PPID: 1, Comm: "bash"}}, wantID: 10, wantOK: true},
		{name: "grandparent", chain: []Proc{{PID: 10, PPID: 9, Comm: "sh"}, {PID: 9, PPID: 1, Comm: "claude"}}, wantID: 9, wantOK: true},
		{name: "nested claude inside claude: nearest wins", chain: []Proc{
			{PID: 30, PPID: 20, Comm: "sh"}, {PID: 20, PPID: 12, Comm: "claude"},
			{PID: 12, PPID: 10, Comm: "bash"}, {PID: 10, PPID: 1, Comm: "claude"},
		}, wantID: 20, wantOK: true},
		{name: "claude.exe", chain: []Proc{{PID: 10, PPID: 9, Comm: "sh"}, {PID: 9, PPID: 1, Comm: "claude.exe"}}, wantID: 9, wantOK: true},
		{name: "space after: claude code", chain: []Proc{{PID: 10, PPID: 1, Comm: "claude code"}}},
		{name: "space before: my claude", chain: []Proc{{PID: 10, PPID: 1, Comm: "my claude"}}},
		{name: "spaced names skipped, claude above", chain: []Proc{
			{PID: 10, PPID: 9, Comm: "claude code"}, {PID: 9, PPID: 8, Comm: "my claude"}, {PID: 8, PPID: 1, Comm: "claude"},
		}, wantID: 8, wantOK: true},
		{name: "capitalised: Claude", chain: []Proc{{PID: 10, PPID: 1, Comm: "Claude"}}},
		{name: "prefix: claude-foo", chain: []Proc{{PID: 10, PPID: 1, Comm: "claude-foo"}}},
		{name: "trailing space: claude ", chain: []Proc{{PID: 10, PPID: 1, Comm: "claude "}}},
		{name: "path: /usr/bin/claude", chain: []Proc{{PID: 10, PPID: 1, Comm: "/usr/bin/claude"}}},
		{name: "node", chain: []Proc{{PID: 10, PPID: 1, Comm: "node"}}},
		// Codex CLI 0.171.0: bridge <- codex (native) <- node .../bin/codex;
		// interactively the codex is the app-server daemon.
		{name: "codex: the native binary, not its node launcher", chain: []Proc{
			{PID: 30, PPID: 20, Comm: "codex"}, {PID: 20, PPID: 1, Comm: "node", Args: []string{"node", "/x/node_modules/.bin/codex", "exec"}},
		}, wantID: 30, wantOK: true},
		{name: "codex launcher alone", chain: []Proc{{PID: 20, PPID: 1, Comm: "node", Args: []string{"node", "/x/node_modules/@openai/codex/bin/codex.js"}}}, wantID: 20, wantOK: true},
		// Gemini CLI 0.61.0: bridge <- node (relaunched) <- node (launcher),
		// the same command line; the nearer one is the session's.
		{name: "gemini: the relaunched node, not the launcher", chain: []Proc{
			{PID: 30, PPID: 20, Comm: "node", Args: []string{"/usr/bin/node", "--max-old-space-size=12052", "/x/node_modules/.bin/gemini"}},
			{PID: 20, PPID: 1, Comm: "node", Args: []string{"node", "/x/node_modules/.bin/gemini"}},
		}, wantID: 30, wantOK: true},
		{name: "gemini by its bundle", chain: []Proc{{PID: 30, PPID: 1, Comm: "node", Args: gemini}}, wantID: 30, wantOK: true},
		{name: "gemini as a process title", chain: []Proc{{PID: 30, PPID: 1, Comm: "gemini"}}, wantID: 30, wantOK: true},
		{name: "a node in between is not an agent", chain: []Proc{
			{PID: 40, PPID: 30, Comm: "node", Args: []string{"node", "/opt/mcp-proxy/index.js"}},
			{PID: 30, PPID: 1, Comm: "node", Args: gemini},
		}, wantID: 30, wantOK: true},
		{name: "claude inside gemini: nearest wins", chain: []Proc{
			{PID: 40, PPID: 30, Comm: "claude"}, {PID: 30, PPID: 1, Comm: "node", Args: gemini},
		}, wantID: 40, wantOK: true},
		{name: "codex inside claude: nearest wins", chain: []Proc{
			{PID: 40, PPID: 30, Comm: "codex"}, {PID: 30, PPID: 20, Comm: "bash"}, {PID: 20, PPID: 1, Comm: "claude"},
		}, wantID: 40, wantOK: true},
		{name: "codex-foo is not codex", chain: []Proc{{PID: 10, PPID: 1, Comm: "codex-foo"}}},
		{name: "codex-code-mode-host is not codex", chain: []Proc{{PID: 10, PPID: 1, Comm: "codex-code-mode"}}},
		{name: "Gemini is not gemini", chain: []Proc{{PID: 10, PPID: 1, Comm: "Gemini"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, ok := Nearest(tc.chain)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.wantID, pid)
		})
	}
}

func TestIdentify(t *testing.T) {
	t.Parallel()
	node := func(args ...string) Proc { return Proc{Comm: "node", Args: append([]string{"node"}, args...)} }
	for _, tc := range []struct {
		name string
		p    Proc
		want Client
	}{
		{name: "claude", p: Proc{Comm: "claude"}, want: Claude},
		{name: "claude.exe", p: Proc{Comm: "claude.exe"}, want: Claude},
		{name: "codex", p: Proc{Comm: "codex"}, want: Codex},
		{name: "gemini", p: Proc{Comm: "gemini"}, want: Gemini},
		{name: "bash", p: Proc{Comm: "bash"}},
		{name: "node without a command line", p: Proc{Comm: "node"}},
		{name: "node gemini bin link", p: node("/usr/local/bin/gemini"), want: Gemini},
		{name: "node gemini bundle", p: node("/x/@google/gemini-cli/bundle/gemini.js"), want: Gemini},
		{name: "node in the gemini package", p: node("/x/node_modules/@google/gemini-cli/dist/index.js"), want: Gemini},
		{name: "node with options then gemini", p: node("--max-old-space-size=12052", "--no-warnings", "/x/.bin/gemini", "-p", "hi"), want: Gemini},
		{name: "nodejs gemini", p: Proc{Comm: "nodejs", Args: []string{"nodejs", "/x/.bin/gemini"}}, want: Gemini},
		{name: "node codex bin link", p: node("/x/.bin/codex", "exec"), want: Codex},
		{name: "node codex.js", p: node("/x/@openai/codex/bin/codex.js"), want: Codex},
		{name: "node another script", p: node("/srv/app/server.js")},
		{name: "node a script named like a prompt", p: node("/srv/app/server.js", "gemini")},
		{name: "node -r takes a value", p: node("-r", "/x/.bin/gemini", "/srv/app.js")},
		{name: "node --require=x", p: node("--require=/x/hook.js", "/x/.bin/codex"), want: Codex},
		{name: "node -e evaluates code", p: node("-e", "require('/x/.bin/gemini')")},
		{name: "node reading stdin", p: node("-", "/x/.bin/gemini")},
		{name: "node repl", p: node()},
		{name: "a comm of node with gemini args is only read for node", p: Proc{Comm: "python3", Args: []string{"python3", "/x/.bin/gemini"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Identify(tc.p)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestClient_OwnsSession(t *testing.T) {
	t.Parallel()
	require.True(t, Claude.OwnsSession())
	require.True(t, Gemini.OwnsSession())
	require.False(t, Codex.OwnsSession(), "one Codex app-server daemon serves every TUI session of a CODEX_HOME")
}

func TestChain_Self(t *testing.T) {
	t.Parallel()
	chain, err := Chain(t.Context(), os.Getpid())
	require.NoError(t, err)
	require.NotEmpty(t, chain)
	require.Equal(t, os.Getppid(), chain[0].PID, "the chain starts at the parent")
	for i := 1; i < len(chain); i++ {
		require.Equal(t, chain[i-1].PPID, chain[i].PID, "each entry is the previous one's parent")
	}
	require.LessOrEqual(t, len(chain), MaxDepth)
}

func TestChain_Missing(t *testing.T) {
	t.Parallel()
	// A child that has been reaped no longer exists.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = helperEnv("")
	require.NoError(t, cmd.Run())
	_, err := Chain(t.Context(), cmd.Process.Pid)
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprint(cmd.Process.Pid))
}

func TestChain_Cancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Chain(ctx, os.Getpid())
	require.ErrorIs(t, err, context.Canceled)
}

// TestAgentPID_RealProcess execs the test binary under an agent's name
// and checks that its child finds it with AgentPID. This test process may
// itself run under a real agent; the helper is nearer, so it must win.
func TestAgentPID_RealProcess(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		comm   string // the name the helper is executed as
		runAs  string
		parent string   // the Comm of the child's parent
		args   []string // the helper's arguments (a node's script)
	}{
		{name: "claude, direct child", comm: "claude", runAs: "claude", parent: "claude"},
		{name: "claude, through sh -c", comm: "claude", runAs: "claude-via-sh", parent: "sh"},
		{name: "claude.exe", comm: "claude.exe", runAs: "claude", parent: "claude.exe"},
		{name: "codex", comm: "codex", runAs: "claude", parent: "codex"},
		{name: "codex, through sh -c", comm: "codex", runAs: "claude-via-sh", parent: "sh"},
		{name: "gemini's node", comm: "node", runAs: "claude", parent: "node",
			args: []string{"--max-old-space-size=12052", "/x/node_modules/.bin/gemini"}},
		{name: "gemini's node, through sh -c", comm: "node", runAs: "claude-via-sh", parent: "sh",
			args: []string{"/x/node_modules/@google/gemini-cli/bundle/gemini.js"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a process of its own, in a folder of its own
			link := filepath.Join(t.TempDir(), tc.comm)
			require.NoError(t, os.Symlink(exe, link))
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), link, tc.args...)
			cmd.Env = helperEnv(tc.runAs)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "helper stderr: %s", stderr.String())

			var got printed
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), "helper stdout: %q", stdout.String())
			require.Empty(t, got.Err)
			require.True(t, got.OK)
			require.Equal(t, cmd.Process.Pid, got.PID, "the child must find the helper, its nearest claude")
			require.Equal(t, tc.parent, got.ParentComm)
		})
	}
}

// TestAgentPID_NotAgent runs the same helper under names that are not
// agent names: the child must not find it (it may find a real agent above
// this test, but never the helper). It also pins Comm to what ps shows: the
// kernel keeps 15 bytes of a longer name, and Chain must not lengthen it
// again from argv[0] as gopsutil's Name does.
func TestAgentPID_NotAgent(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		file string   // the name the helper is executed as
		comm string   // what ps -o comm= shows for it
		args []string // its arguments
	}{
		{file: "Claude", comm: "Claude"},
		{file: "claude-foo", comm: "claude-foo"},
		{file: "claude code", comm: "claude code"},
		{file: "claude-code-helper-long", comm: "claude-code-hel"},
		{file: "codex-foo", comm: "codex-foo"},
		{file: "node", comm: "node", args: []string{"/srv/mcp-proxy/index.js", "gemini"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel() // a process of its own, in a folder of its own
			link := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.Symlink(exe, link))
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), link, tc.args...)
			cmd.Env = helperEnv("claude")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "helper stderr: %s", stderr.String())

			var got printed
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), "helper stdout: %q", stdout.String())
			require.Empty(t, got.Err)
			require.NotEqual(t, cmd.Process.Pid, got.PID)
			self, ok := Nearest(mustChain(t))
			require.Equal(t, ok, got.OK, "the child sees the same Claude as this test, if any")
			require.Equal(t, self, got.PID)
			require.Equal(t, tc.comm, got.ParentComm)
		})
	}
}

func mustChain(t *testing.T) []Proc {
	t.Helper()
	chain, err := Chain(t.Context(), os.Getpid())
	require.NoError(t, err)
	return chain
}
