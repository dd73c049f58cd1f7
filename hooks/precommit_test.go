package hooks

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/clearctl"
)

// fakeGit answers rev-parse with top and diff with the NUL-separated names.
func fakeGit(top string, names ...string) func(context.Context, ...string) ([]byte, error) {
	return func(_ context.Context, args ...string) ([]byte, error) {
		switch args[0] {
		case "rev-parse":
			return []byte(top + "\n"), nil
		case "diff":
			if len(names) == 0 {
				return nil, nil
			}
			return []byte(strings.Join(names, "\x00") + "\x00"), nil
		}
		return nil, errors.New("unexpected git " + strings.Join(args, " "))
	}
}

func (g *guardFixture) preCommitConfig(t *testing.T) PreCommitConfig {
	gc := g.config()
	return PreCommitConfig{
		Bridge:     gc.Bridge,
		Timeout:    5 * time.Second,
		CheckPaths: gc.CheckPaths,
		Git:        fakeGit("/r", "README.md", "src/auth/login.go", "src/auth/\xffodd.go"),
		AskBee: func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
			t.Error("bee asked under a bee session")
			return clearctl.CheckPathsAnswer{}, errors.New("not here")
		},
		Now: func() time.Time { return testNow },
	}
}

const wantRefusal = `bee: commit refused: src/auth/login.go is reserved by agent:alice#0491068b for a-12 ("moving sessions to the store", pattern src/auth/**, exclusive, for 12m); ` +
	`src/auth/` + "\uFFFD" + `odd.go is reserved by agent:alice#0491068b for a-12 ("moving sessions to the store", pattern src/auth/**, exclusive, for 12m).
bee: another live identity holds these paths exclusively. Unstage them (git restore --staged PATH) and commit the rest, or wait until they are released; to ask for them, post to the holder (bee_post_action to agent:alice#0491068b, or bee post --to agent:alice#0491068b).
`

func TestPreCommit_AsksTheBridge(t *testing.T) {
	t.Parallel()
	g := newGuardFixture(t)
	res := PreCommit(t.Context(), g.preCommitConfig(t))
	require.Equal(t, PreCommitResult{Refuse: true, Text: wantRefusal}, res)
	require.Equal(t, []clearctl.CheckPathsRequest{{
		Paths: []string{"/r/README.md", "/r/src/auth/login.go", "/r/src/auth/\uFFFDodd.go"},
		Tool:  clearctl.ToolGitCommit, Cwd: "/r",
	}}, g.asked())

	cfg := g.preCommitConfig(t)
	cfg.Git = fakeGit("/r", "README.md", "docs/auth.md")
	require.Equal(t, PreCommitResult{}, PreCommit(t.Context(), cfg))

	cfg.Git = fakeGit("/r") // nothing staged: nothing asked
	before := len(g.asked())
	require.Equal(t, PreCommitResult{}, PreCommit(t.Context(), cfg))
	require.Len(t, g.asked(), before)
}

// Only an exclusive reservation stops a commit.
func TestPreCommit_SharedDoesNotRefuse(t *testing.T) {
	t.Parallel()
	g := newGuardFixture(t)
	g.answer = func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
		c := heldAuth("/r/src/auth/login.go")
		c.Exclusive = false
		return clearctl.CheckPathsAnswer{Conflicts: []clearctl.PathConflict{c}}, nil
	}
	require.Equal(t, PreCommitResult{}, PreCommit(t.Context(), g.preCommitConfig(t)))
}

// With no bee session above the commit, bee is asked, as a person.
func TestPreCommit_NoSessionAsksBee(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*guardFixture, *PreCommitConfig)
	}{
		{"no claude", func(_ *guardFixture, c *PreCommitConfig) {
			c.Bridge.ClaudePID = 0
			c.Bridge.FindClaude = func(context.Context) (int, bool, error) { return 0, false, nil }
		}},
		{"no run file", func(g *guardFixture, _ *PreCommitConfig) { require.NoError(t, runfileRemove(g.fixture)) }},
		{"dead bridge", func(_ *guardFixture, c *PreCommitConfig) { c.Bridge.Alive = func(int) bool { return false } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardFixture(t)
			cfg := g.preCommitConfig(t)
			tc.change(g, &cfg)
			var asked []clearctl.CheckPathsRequest
			cfg.AskBee = func(ctx context.Context, req clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				asked = append(asked, req)
				return holdAuth(ctx, req)
			}
			require.Equal(t, PreCommitResult{Refuse: true, Text: wantRefusal}, PreCommit(t.Context(), cfg))
			require.Len(t, asked, 1)
			require.Empty(t, g.asked(), "no bridge to ask")

			cfg.AskBee = func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				return clearctl.CheckPathsAnswer{}, errors.New("bee: unknown command \"reservations\"")
			}
			require.Equal(t, PreCommitResult{Text: `bee-hook: commit not checked against reservations: no bee session above this commit, and bee could not tell: bee: unknown command "reservations"`},
				PreCommit(t.Context(), cfg))
		})
	}
}

// Every error lets the commit through, with one line saying why.
func TestPreCommit_AllowsOnEveryError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*guardFixture, *PreCommitConfig)
		want   string
	}{
		{"git fails", func(_ *guardFixture, c *PreCommitConfig) {
			c.Git = func(context.Context, ...string) ([]byte, error) {
				return nil, errors.New("git rev-parse: not a git repository")
			}
		}, "git rev-parse: not a git repository"},
		{"odd top", func(_ *guardFixture, c *PreCommitConfig) { c.Git = fakeGit("r", "x") },
			`git rev-parse --show-toplevel said "r", not an absolute directory`},
		{"older bridge", func(g *guardFixture, _ *PreCommitConfig) {
			g.answer = func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				return clearctl.CheckPathsAnswer{}, &clearctl.StatusError{Code: 404, Op: "check paths"}
			}
		}, "the bridge (pid 5151) does not serve /check-paths: it runs an older bee"},
		{"bridge fails, token scrubbed", func(g *guardFixture, _ *PreCommitConfig) {
			g.answer = func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				return clearctl.CheckPathsAnswer{}, errors.New("oops " + g.entry.Token)
			}
		}, "oops [token]"},
		{"port not the bridge's", func(_ *guardFixture, c *PreCommitConfig) {
			c.Bridge.Listener = func(int, int) error { return errors.New("not its port") }
		}, "not sending the token to port 40123: not its port; the bridge (pid 5151) may be restarting, or another process holds its port"},
		{"panic", func(g *guardFixture, _ *PreCommitConfig) {
			g.answer = func(context.Context, clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) { panic("boom") }
		}, "internal error: boom"},
		{"bridge hangs", func(g *guardFixture, c *PreCommitConfig) {
			c.Timeout = 50 * time.Millisecond
			g.answer = func(ctx context.Context, _ clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond)
				return clearctl.CheckPathsAnswer{}, ctx.Err()
			}
		}, "no decision within 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardFixture(t)
			cfg := g.preCommitConfig(t)
			tc.change(g, &cfg)
			res := PreCommit(t.Context(), cfg)
			require.Equal(t, PreCommitResult{Text: "bee-hook: commit not checked against reservations: " + tc.want}, res)
		})
	}
}

// askBee runs the bee beside this executable (here: the test binary's
// folder holds none, so the one on PATH) with beeCheckArgs, the request on
// stdin, and takes its answer only when it has the right shape.
func TestAskBee(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	exe, err := os.Executable()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(filepath.Dir(exe), "bee")); err == nil {
		t.Skip("a bee beside the test binary would be asked instead of the fake")
	}
	req := clearctl.CheckPathsRequest{Paths: []string{"/r/src/auth/a.go"}, Tool: clearctl.ToolGitCommit, Cwd: "/r"}
	// As git runs a pre-commit hook in a linked worktree.
	t.Setenv("GIT_DIR", "/r/.git/worktrees/w")
	t.Setenv("GIT_INDEX_FILE", "/r/.git/worktrees/w/index")
	t.Setenv("GIT_WORK_TREE", "/r")
	t.Setenv("GIT_AUTHOR_NAME", "kept")
	for _, tc := range []struct {
		name   string
		script string
		want   clearctl.CheckPathsAnswer
		err    string
	}{
		{name: "denies", script: `[ "$*" = "reservations check --json" ] || exit 9
read -r line; case "$line" in *'"paths":["/r/src/auth/a.go"]'*) ;; *) exit 8;; esac
echo '{"allow":false,"conflicts":[{"path":"/r/src/auth/a.go","holder":"agent:a#00000001","exclusive":true}]}'`,
			want: clearctl.CheckPathsAnswer{Conflicts: []clearctl.PathConflict{{Path: "/r/src/auth/a.go", Holder: "agent:a#00000001", Exclusive: true}}}},
		{name: "allows", script: `cat >/dev/null; echo '{"allow":true}'`, want: clearctl.CheckPathsAnswer{Allow: true}},
		// git's variables about the commit's repository would make bee
		// place files wrongly (see gitHookVars); the rest pass.
		{name: "without git's hook variables", script: `[ -z "${GIT_DIR+x}${GIT_INDEX_FILE+x}${GIT_WORK_TREE+x}" ] || exit 7
[ "$GIT_AUTHOR_NAME" = "kept" ] || exit 6
cat >/dev/null; echo '{"allow":true}'`, want: clearctl.CheckPathsAnswer{Allow: true}},
		{name: "older bee", script: `echo 'bee: unknown command "reservations" (see bee --help)' >&2; exit 2`,
			err: `reservations check --json: exit status 2: bee: unknown command "reservations" (see bee --help)`},
		{name: "not an answer", script: `echo '{"ok":true}'`, err: `the answer is not a reservations check's: {"ok":true}`},
		{name: "bad answer", script: `echo '{"allow":false}'`, err: "the answer is not a reservations check's: it refuses without naming a conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(bin, "bee"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755))
			a, err := askBee(t.Context(), req)
			if tc.err != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, a)
		})
	}
	t.Run("no bee", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := askBee(t.Context(), req)
		require.EqualError(t, err, "no bee beside bee-hook or on PATH; install it with: go install github.com/tractat-us/bee/cmd/bee@latest")
	})
}

// The real git, in a real repository: the staged paths, renames as both
// ends, deletions, and names git would quote, relative to the top even
// from a subdirectory and before the first commit.
func TestRunGit_StagedPaths(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	gitIn("init", "-q")
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(top, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(top, name), []byte(data), 0o644))
	}
	write("a.go", "package a\n")
	gitIn("add", "a.go")

	ask := func() []string {
		var got []string
		cfg := PreCommitConfig{
			Bridge: Bridge{ClaudePID: 0, FindClaude: func(context.Context) (int, bool, error) { return 0, false, nil }},
			Git: func(ctx context.Context, args ...string) ([]byte, error) {
				return runGitIn(ctx, filepath.Join(top, "sub"), args...)
			},
			AskBee: func(_ context.Context, req clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
				got = req.Paths
				return clearctl.CheckPathsAnswer{Allow: true}, nil
			},
		}
		require.Equal(t, PreCommitResult{}, PreCommit(t.Context(), cfg))
		return got
	}
	require.NoError(t, os.MkdirAll(filepath.Join(top, "sub"), 0o755))
	realTop, err := filepath.EvalSymlinks(top)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(realTop, "a.go")}, ask(), "before the first commit")

	gitIn("commit", "-q", "-m", "one")
	write("src/auth/keep.go", strings.Repeat("package auth\n// a line long enough to be seen as renamed\n", 20))
	write("b.go", "package b\n")
	gitIn("add", ".")
	gitIn("commit", "-q", "-m", "two")

	gitIn("mv", "src/auth/keep.go", "src/moved.go")
	gitIn("rm", "-q", "b.go")
	write("dir with space/é\nnewline.go", "x")
	gitIn("add", ".")
	require.ElementsMatch(t, []string{
		filepath.Join(realTop, "src/auth/keep.go"),
		filepath.Join(realTop, "src/moved.go"),
		filepath.Join(realTop, "b.go"),
		filepath.Join(realTop, "dir with space/é\nnewline.go"),
	}, ask())
}

// runGitIn is runGit in dir.
func runGitIn(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return runGit(ctx, append([]string{"-C", dir}, args...)...)
}
