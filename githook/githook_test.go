package githook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain keeps the user's and the system's git configuration (a global
// core.hooksPath, say) out of the tests: Install runs git with this
// process's environment.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// newRepo makes a git repository with one commit and returns its top,
// symlinks resolved.
func newRepo(t *testing.T) string {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	gitIn(t, top, "init", "-q")
	gitIn(t, top, "commit", "-q", "--allow-empty", "-m", "one")
	return top
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

const beeHook = "/opt/bee bin/bee-hook"

func TestInstall_Fresh(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	sub := filepath.Join(top, "pkg")
	require.NoError(t, os.Mkdir(sub, 0o755))

	res, err := Install(t.Context(), sub, beeHook)
	require.NoError(t, err)
	want := filepath.Join(top, ".git", "hooks", "pre-commit")
	require.Equal(t, Result{
		Path: want, Written: true, AddLine: `'/opt/bee bin/bee-hook' --pre-commit || exit $?`,
		Shared: "every worktree of this clone (the git common directory's hooks)",
	}, res)
	data, err := os.ReadFile(want)
	require.NoError(t, err)
	require.Equal(t, Script(beeHook), string(data))
	fi, err := os.Stat(want)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	require.Contains(t, Describe(res), "installed bee's pre-commit hook "+want)

	// Again: nothing to do.
	res, err = Install(t.Context(), top, beeHook)
	require.NoError(t, err)
	require.False(t, res.Written)
	require.False(t, res.Foreign)
	require.Contains(t, Describe(res), "is installed already")

	// An older bee hook (another bee-hook path) is replaced.
	res, err = Install(t.Context(), top, "/usr/local/bin/bee-hook")
	require.NoError(t, err)
	require.True(t, res.Written)
	require.True(t, res.Replaced)
	data, err = os.ReadFile(want)
	require.NoError(t, err)
	require.Equal(t, Script("/usr/local/bin/bee-hook"), string(data))
	entries, err := os.ReadDir(filepath.Dir(want))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), ".pre-commit.bee-"), "temporary file left behind: %s", e.Name())
	}
}

// A hook that is not bee's is never overwritten: Install says which line
// to add instead.
func TestInstall_NeverOverwritesAnotherHook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"a script", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nmake lint\n"), 0o755))
		}},
		{"a link", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "husky")
			require.NoError(t, os.WriteFile(target, []byte("#!/bin/sh\n"+Marker+"\n"), 0o755))
			require.NoError(t, os.Symlink(target, path))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			top := newRepo(t)
			path := filepath.Join(top, ".git", "hooks", "pre-commit")
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			tc.setup(t, path)
			before, err := os.Lstat(path)
			require.NoError(t, err)
			beforeData, _ := os.ReadFile(path)

			res, err := Install(t.Context(), top, beeHook)
			require.NoError(t, err)
			require.True(t, res.Foreign)
			require.False(t, res.Written)
			require.Contains(t, Describe(res), "is not bee's, so it was left as it is. To have it check reservations too, add this line to it:\n\n    '/opt/bee bin/bee-hook' --pre-commit || exit $?\n")

			after, err := os.Lstat(path)
			require.NoError(t, err)
			require.Equal(t, before.Mode(), after.Mode())
			afterData, _ := os.ReadFile(path)
			require.Equal(t, beforeData, afterData)
		})
	}
}

// Worktrees share the common directory's hooks; core.hooksPath is where
// git runs hooks from when set, a relative one from the worktree's top.
func TestInstall_Where(t *testing.T) {
	t.Parallel()
	t.Run("linked worktree", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		wt := filepath.Join(filepath.Dir(top), filepath.Base(top)+"-wt")
		gitIn(t, top, "worktree", "add", "-q", wt)
		t.Cleanup(func() { os.RemoveAll(wt) })
		res, err := Install(t.Context(), wt, beeHook)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(top, ".git", "hooks", "pre-commit"), res.Path)
		require.Equal(t, "every worktree of this clone (the git common directory's hooks)", res.Shared)
	})
	t.Run("absolute core.hooksPath", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		hooks := filepath.Join(t.TempDir(), "shared hooks")
		gitIn(t, top, "config", "core.hooksPath", hooks)
		res, err := Install(t.Context(), top, beeHook)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(hooks, "pre-commit"), res.Path)
		require.True(t, res.Written, "the folder is made")
		require.Equal(t, "every repository whose core.hooksPath is "+hooks, res.Shared)
	})
	t.Run("relative core.hooksPath", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		gitIn(t, top, "config", "core.hooksPath", ".githooks")
		sub := filepath.Join(top, "a", "b")
		require.NoError(t, os.MkdirAll(sub, 0o755))
		res, err := Install(t.Context(), sub, beeHook)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(top, ".githooks", "pre-commit"), res.Path)
		require.Contains(t, res.Shared, "this worktree only: core.hooksPath (.githooks) is relative")
	})
	t.Run("not a repository", func(t *testing.T) {
		t.Parallel()
		_, err := Install(t.Context(), t.TempDir(), beeHook)
		require.ErrorContains(t, err, "install git hook: git rev-parse")
	})
	t.Run("relative bee-hook", func(t *testing.T) {
		t.Parallel()
		_, err := Install(t.Context(), t.TempDir(), "bee-hook")
		require.EqualError(t, err, `install git hook: bee-hook path "bee-hook" is not absolute`)
	})
}

// The script runs the bee-hook it names with --pre-commit and passes its
// exit status on; when that bee-hook is gone it runs the one on PATH, and
// with none it lets the commit through, saying so.
func TestScript_Runs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	named := filepath.Join(dir, "it's here", "bee-hook")
	require.NoError(t, os.MkdirAll(filepath.Dir(named), 0o755))
	require.NoError(t, os.WriteFile(named, []byte("#!/bin/sh\necho \"named $*\"\nexit 1\n"), 0o755))
	onPath := filepath.Join(dir, "path")
	require.NoError(t, os.MkdirAll(onPath, 0o755))
	hook := filepath.Join(dir, "pre-commit")
	require.NoError(t, os.WriteFile(hook, []byte(Script(named)), 0o755))

	run := func(path string) (string, int) {
		cmd := exec.Command(hook)
		cmd.Env = []string{"PATH=" + path}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	out, code := run(onPath + ":/usr/bin:/bin")
	require.Equal(t, "named --pre-commit\n", out)
	require.Equal(t, 1, code)

	require.NoError(t, os.Remove(named))
	require.NoError(t, os.WriteFile(filepath.Join(onPath, "bee-hook"), []byte("#!/bin/sh\necho \"on path $*\"\n"), 0o755))
	out, code = run(onPath + ":/usr/bin:/bin")
	require.Equal(t, "on path --pre-commit\n", out)
	require.Equal(t, 0, code)

	out, code = run("/usr/bin:/bin")
	require.Equal(t, "bee: bee-hook is neither at "+named+" nor on PATH; commit not checked against reservations\n", out)
	require.Equal(t, 0, code)
}

func TestFindBeeHook(t *testing.T) {
	dir := t.TempDir()
	beside := filepath.Join(dir, "bee-hook")
	require.NoError(t, os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755))
	got, err := FindBeeHook(filepath.Join(dir, "bee"))
	require.NoError(t, err)
	require.Equal(t, beside, got)

	other := t.TempDir()
	onPath := filepath.Join(other, "bee-hook")
	require.NoError(t, os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", other)
	got, err = FindBeeHook(filepath.Join(t.TempDir(), "bee"))
	require.NoError(t, err)
	require.Equal(t, onPath, got)

	t.Setenv("PATH", t.TempDir())
	_, err = FindBeeHook(filepath.Join(t.TempDir(), "bee"))
	require.EqualError(t, err, "no bee-hook beside bee or on PATH; install it with: go install github.com/tractat-us/bee/cmd/bee-hook@latest")
}
