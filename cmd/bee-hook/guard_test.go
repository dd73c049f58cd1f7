package main

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/githook"
	"github.com/tractat-us/bee/runfile"
)

// Environment of a claude stand-in that runs a command (see
// runAsClaudeCommand).
const (
	claudeCmdEnv   = "BEE_TEST_CLAUDE_CMD"
	claudeStdinEnv = "BEE_TEST_CLAUDE_STDIN"
)

// runAsClaudeCommand is a stand-in claude process that runs one command
// the way Claude Code runs hooks and Bash commands, through /bin/sh -c,
// once a line arrives on its stdin (the test has written its run file by
// then): $BEE_TEST_CLAUDE_CMD, with $BEE_TEST_CLAUDE_STDIN on its stdin,
// $0 the test binary, and BEE_TEST_RUN_AS=bee-hook in its environment, so
// that the test binary (or a link to it named bee-hook) is bee-hook. It
// passes the command's stdout, stderr and exit status through.
func runAsClaudeCommand() int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go-ahead:", err)
		return 100
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 100
	}
	cmd := exec.Command("/bin/sh", "-c", os.Getenv(claudeCmdEnv), exe)
	cmd.Env = append(os.Environ(), runAsEnv+"=bee-hook")
	cmd.Stdin = strings.NewReader(os.Getenv(claudeStdinEnv))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 100
	}
	return 0
}

// A claudeRun is what a claude stand-in's command did.
type claudeRun struct {
	stdout, stderr string
	code           int
	took           time.Duration // from the go-ahead to the claude's exit
}

// underClaude runs cmdline under a claude stand-in (the test binary named
// claude) in dir, with stdin; when bridge is not nil, the run directory
// in $BEE_RUN_DIR names it as the claude's bridge, served by this process.
func underClaude(t *testing.T, dir, cmdline, stdin string, bridge *runfile.Entry, env ...string) claudeRun {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	claude := filepath.Join(t.TempDir(), "claude")
	require.NoError(t, os.Symlink(exe, claude))
	runDir := filepath.Join(t.TempDir(), "run")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runAsEnv+"=claude-command", runfile.EnvDir+"="+runDir,
		claudeCmdEnv+"="+cmdline, claudeStdinEnv+"="+stdin,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	goAhead, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	if bridge != nil {
		require.NoError(t, runfile.Write(runDir, cmd.Process.Pid, *bridge))
	}
	start := time.Now()
	_, err = goAhead.Write([]byte("go\n"))
	require.NoError(t, err)
	err = cmd.Wait()
	run := claudeRun{stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		run.code = ee.ExitCode()
	} else {
		require.NoError(t, err, "stderr: %s", errOut.String())
	}
	require.NotEqual(t, 100, run.code, "the stand-in failed: %s", run.stderr)
	return run
}

// startBridge serves the control channel in this process with checker
// (nil: none, as an older bridge) and returns the run file entry naming
// it.
func startBridge(t testing.TB, checker clearctl.PathChecker, checkWithin time.Duration) runfile.Entry {
	t.Helper()
	tok, err := runfile.NewToken()
	require.NoError(t, err)
	s := clearctl.New(tok, clearctl.RetirerFunc(func(context.Context, clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		return clearctl.RetireResponse{}, errors.New("not in this test")
	}), &clearctl.Options{PathChecker: checker, CheckWithin: checkWithin})
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return runfile.Entry{Port: s.Port(), Token: tok, PID: os.Getpid()}
}

// holdAuth denies the paths with /src/auth/ in them, held by alice for
// a-12, and allows the others.
func holdAuth(_ context.Context, req clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
	a := clearctl.CheckPathsAnswer{Allow: true}
	for _, p := range req.Paths {
		if strings.Contains(p, "/src/auth/") {
			a.Allow = false
			a.Conflicts = append(a.Conflicts, clearctl.PathConflict{
				Path: p, Holder: "agent:alice#0491068b", Pattern: "src/auth/**", Exclusive: true,
				Reason: "moving sessions to the store", Action: "a-12",
			})
		}
	}
	return a, nil
}

// decision is Claude Code's PreToolUse hook output, read strictly.
type decision struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	} `json:"hookSpecificOutput"`
}

func editInput(tool, cwd, key, path string) string {
	data, err := json.Marshal(map[string]any{
		"session_id": "s-1", "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": tool,
		"tool_input": map[string]any{key: path, "content": "x"},
	})
	if err != nil {
		panic(err)
	}
	return string(data)
}

// The guard as Claude Code runs it: bee-hook --guard through sh -c under
// a claude, finding the claude's bridge by the nearest-claude rule and its
// run file, asking it over the real loopback channel.
func TestGuard_UnderClaude(t *testing.T) {
	t.Parallel()
	held := clearctl.PathCheckerFunc(holdAuth)
	for _, tc := range []struct {
		name    string
		checker clearctl.PathChecker
		noRun   bool
		input   string
		deny    string // the reason's start; "" allows
		stderr  string // the line's start; "" none
	}{
		{name: "deny", checker: held, input: editInput("Edit", "/r", "file_path", "/r/src/auth/login.go"),
			deny: `bee: src/auth/login.go is reserved by agent:alice#0491068b for a-12 ("moving sessions to the store", pattern src/auth/**, exclusive). Leave it alone for now: take other work`},
		{name: "allow", checker: held, input: editInput("Write", "/r", "file_path", "/r/docs/x.md")},
		{name: "relative file_path", checker: held, input: editInput("Write", "/r/src", "file_path", "auth/new.go"),
			deny: `bee: auth/new.go is reserved by agent:alice#0491068b`},
		{name: "notebook", checker: held, input: editInput("NotebookEdit", "/r", "notebook_path", "/r/src/auth/n.ipynb"),
			deny: `bee: src/auth/n.ipynb is reserved by agent:alice#0491068b`},
		{name: "older bridge", input: editInput("Edit", "/r", "file_path", "/r/src/auth/login.go"),
			stderr: "bee-hook: edit allowed unchecked: the bridge (pid "},
		{name: "no bridge", noRun: true, input: editInput("Edit", "/r", "file_path", "/r/src/auth/login.go"),
			stderr: "bee-hook: edit allowed unchecked: no live bridge: no bridge registered for claude pid "},
		{name: "not JSON", checker: held, input: "{", stderr: "bee-hook: edit allowed unchecked: cannot read the PreToolUse input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var bridge *runfile.Entry
			if !tc.noRun {
				e := startBridge(t, tc.checker, 0)
				bridge = &e
			}
			run := underClaude(t, t.TempDir(), `"$0" --guard`, tc.input, bridge)
			require.Equal(t, 0, run.code)
			if tc.deny == "" {
				require.Empty(t, run.stdout)
			} else {
				dec := json.NewDecoder(strings.NewReader(run.stdout))
				dec.DisallowUnknownFields()
				var d decision
				require.NoError(t, dec.Decode(&d), run.stdout)
				require.Equal(t, "PreToolUse", d.HookSpecificOutput.HookEventName)
				require.Equal(t, "deny", d.HookSpecificOutput.PermissionDecision)
				require.True(t, strings.HasPrefix(d.HookSpecificOutput.PermissionDecisionReason, tc.deny), d.HookSpecificOutput.PermissionDecisionReason)
				require.Equal(t, 1, strings.Count(run.stdout, "\n"), "one line")
			}
			if tc.stderr == "" {
				require.Empty(t, run.stderr)
			} else {
				require.True(t, strings.HasPrefix(run.stderr, tc.stderr), run.stderr)
				require.Equal(t, 1, strings.Count(run.stderr, "\n"), "one line: %q", run.stderr)
			}
			if bridge != nil {
				require.NotContains(t, run.stdout+run.stderr, bridge.Token)
			}
		})
	}
}

// A bridge that hangs does not hold the edit up: the hook allows, saying
// so, within its bound (700 ms, with generous slack for a loaded machine
// and a race-instrumented binary here; the benchmark measures it).
func TestGuard_UnderClaude_BridgeHangs(t *testing.T) {
	t.Parallel()
	e := startBridge(t, clearctl.PathCheckerFunc(func(ctx context.Context, _ clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
		<-ctx.Done()
		return clearctl.CheckPathsAnswer{}, ctx.Err()
	}), time.Hour)
	run := underClaude(t, t.TempDir(), `"$0" --guard`, editInput("Edit", "/r", "file_path", "/r/src/auth/login.go"), &e)
	require.Equal(t, 0, run.code)
	require.Empty(t, run.stdout)
	require.Equal(t, "bee-hook: edit allowed unchecked: no decision within 700ms\n", run.stderr)
	require.Less(t, run.took, 5*time.Second)
}

// gitEnv keeps the user's git configuration out, and names the committer.
var gitEnv = []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// newHookedRepo makes a git repository with bee's pre-commit hook
// installed by githook.Install, running the test binary under the name
// bee-hook; bee (when beeScript is not "") is a script beside it.
func newHookedRepo(t *testing.T, beeScript string) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := t.TempDir()
	// A link, not a symbolic one: bee-hook looks for bee beside its own
	// executable, which a symbolic link would resolve to the test binary's
	// folder.
	if err := os.Link(exe, filepath.Join(bin, "bee-hook")); err != nil {
		data, err := os.ReadFile(exe)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(bin, "bee-hook"), data, 0o755))
	}
	if beeScript != "" {
		require.NoError(t, os.WriteFile(filepath.Join(bin, "bee"), []byte("#!/bin/sh\n"+beeScript+"\n"), 0o755))
	}
	top, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	gitIn(t, top, "init", "-q")
	gitIn(t, top, "commit", "-q", "--allow-empty", "-m", "start")
	res, err := githook.Install(t.Context(), top, filepath.Join(bin, "bee-hook"))
	require.NoError(t, err)
	require.True(t, res.Written)
	for _, f := range []string{"src/auth/login.go", "docs/x.md"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(top, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(top, f), []byte("x\n"), 0o644))
	}
	return top
}

func commits(t *testing.T, top string) int {
	t.Helper()
	return strings.Count(gitIn(t, top, "log", "--oneline"), "\n")
}

// A real git commit, run by an agent (under a claude whose bridge holds
// src/auth/** for another identity), is refused when it changes a held
// path, and goes ahead when it does not.
func TestPreCommit_RealGitUnderClaude(t *testing.T) {
	t.Parallel()
	top := newHookedRepo(t, `echo "bee must not be asked under a bee session" >&2; exit 3`)
	e := startBridge(t, clearctl.PathCheckerFunc(holdAuth), 0)

	run := underClaude(t, top, `git add src/auth/login.go && git commit -q -m auth`, "", &e, gitEnv...)
	require.Equal(t, 1, run.code, "stderr: %s", run.stderr)
	require.Contains(t, run.stderr, `bee: commit refused: src/auth/login.go is reserved by agent:alice#0491068b for a-12 ("moving sessions to the store", pattern src/auth/**, exclusive).`)
	require.Contains(t, run.stderr, "Unstage it (git restore --staged PATH) and commit the rest")
	require.NotContains(t, run.stderr, e.Token)
	require.Equal(t, 1, commits(t, top), "nothing committed")

	gitIn(t, top, "restore", "--staged", "src/auth/login.go")
	run = underClaude(t, top, `git add docs/x.md && git commit -q -m docs`, "", &e, gitEnv...)
	require.Equal(t, 0, run.code, "stderr: %s", run.stderr)
	require.Empty(t, run.stderr)
	require.Equal(t, 2, commits(t, top))
}

// A person's commit (no claude above it) asks bee, beside bee-hook, as
// the person: refused on its word; with a bee that cannot tell (an older
// one, without the command), the commit goes ahead with a warning.
func TestPreCommit_RealGitByAPerson(t *testing.T) {
	t.Parallel()
	t.Run("bee refuses", func(t *testing.T) {
		t.Parallel()
		top := newHookedRepo(t, `[ "$*" = "reservations check --json" ] || exit 9
cat >/dev/null
echo '{"allow":false,"conflicts":[{"path":"'"$PWD"'/src/auth/login.go","holder":"agent:alice#0491068b","pattern":"src/auth/**","exclusive":true,"reason":"moving sessions","action":"a-12"}]}'`)
		gitIn(t, top, "add", "src/auth/login.go")
		cmd := exec.Command("git", "commit", "-q", "-m", "auth")
		cmd.Dir = top
		cmd.Env = append(os.Environ(), gitEnv...)
		cmd.Env = append(cmd.Env, runAsEnv+"=bee-hook", runfile.EnvDir+"="+t.TempDir())
		out, err := cmd.CombinedOutput()
		ee, ok := errors.AsType[*exec.ExitError](err)
		require.True(t, ok, "the commit went ahead: %s", out)
		require.Equal(t, 1, ee.ExitCode())
		require.Contains(t, string(out), `bee: commit refused: src/auth/login.go is reserved by agent:alice#0491068b for a-12 ("moving sessions", pattern src/auth/**, exclusive).`)
		require.Equal(t, 1, commits(t, top))
	})
	t.Run("bee cannot tell", func(t *testing.T) {
		t.Parallel()
		top := newHookedRepo(t, `echo 'bee: unknown command "reservations" (see bee --help)' >&2; exit 2`)
		gitIn(t, top, "add", "src/auth/login.go")
		cmd := exec.Command("git", "commit", "-q", "-m", "auth")
		cmd.Dir = top
		cmd.Env = append(os.Environ(), gitEnv...)
		cmd.Env = append(cmd.Env, runAsEnv+"=bee-hook", runfile.EnvDir+"="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), `bee-hook: commit not checked against reservations: no bee session above this commit, and bee could not tell: `)
		require.Contains(t, string(out), `reservations check --json: exit status 2: bee: unknown command "reservations" (see bee --help)`)
		require.Equal(t, 2, commits(t, top))
	})
}

func TestRun_HookFlagsExclusive(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--guard", "--pre-commit"}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, code)
	require.Empty(t, stdout.String())
	require.Equal(t, "bee-hook: --guard, --pre-commit and --wait-for-work are different hooks: give one (see bee-hook --help)\n", stderr.String())
}

// bee-hook starts on every edit: it must stay a small static binary that
// links neither the boards nor the MCP bridge, nor net or net/http (which
// would bring their start-up work, and cgo with them), nor cgo itself.
func TestBeeHook_Light(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/tractat-us/bee/cmd/bee-hook").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/tractat-us/bee/hooks", "go list lists the dependencies")
	for _, dep := range deps {
		for _, banned := range []string{
			"net", "net/http", "crypto/tls", "runtime/cgo",
			"modernc.org/sqlite", "github.com/jackc/pgx/v5", "github.com/modelcontextprotocol/go-sdk/mcp",
			"github.com/tractat-us/bee/actions/board", "github.com/tractat-us/bee/actions/pgboard",
			"github.com/tractat-us/bee/clearctl", "github.com/tractat-us/bee/internal/bridge",
		} {
			require.NotEqual(t, banned, dep, "bee-hook links %s", banned)
		}
	}
}
