package repo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/repo"
)

func TestMain(m *testing.M) {
	// Git as these tests run it, and as Locate may: no environment that
	// points it elsewhere, no configuration but the repositories' own.
	for _, k := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES"} {
		os.Unsetenv(k)
	}
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_AUTHOR_NAME", "bee")
	os.Setenv("GIT_AUTHOR_EMAIL", "bee@example.com")
	os.Setenv("GIT_COMMITTER_NAME", "bee")
	os.Setenv("GIT_COMMITTER_EMAIL", "bee@example.com")
	os.Exit(m.Run())
}

// tempDir is t.TempDir with its symbolic links resolved, as Root is.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "protocol.file.allow=always"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository at dir with one commit.
func newRepo(t testing.TB, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	git(t, dir, "init", "-q", "-b", "main")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "auth"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "auth", "login.go"), []byte("package auth\n"), 0o644))
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func locate(t testing.TB, dir string) repo.Repo {
	t.Helper()
	r, err := repo.Locate(dir)
	require.NoError(t, err)
	return r
}

// agreesWithGit checks Root against git's own answer.
func agreesWithGit(t *testing.T, dir string, r repo.Repo) {
	t.Helper()
	top, err := filepath.EvalSymlinks(git(t, dir, "rev-parse", "--show-toplevel"))
	require.NoError(t, err)
	require.Equal(t, top, r.Root, "Root is git's top directory")
}

func TestLocate_Clones(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	src := newRepo(t, filepath.Join(tmp, "src"))
	git(t, tmp, "clone", "-q", src, "c1")
	git(t, tmp, "clone", "-q", src, "c2")
	c1, c2 := filepath.Join(tmp, "c1"), filepath.Join(tmp, "c2")

	s := locate(t, src)
	require.Equal(t, repo.Host()+":"+filepath.Join(src, ".git"), s.Name, "no origin: the host and the common directory")
	for _, dir := range []string{c1, c2, filepath.Join(c1, "src", "auth")} {
		r := locate(t, dir)
		require.Equal(t, s.Name, r.Name, "a clone of a local repository is named as that repository")
		agreesWithGit(t, dir, r)
	}
	require.Equal(t, c1, locate(t, filepath.Join(c1, "src", "auth")).Root)

	// Remote origins: every form of one URL gives one name.
	git(t, c1, "remote", "set-url", "origin", "https://GitHub.com/Tractat-us/Bee.git")
	git(t, c2, "remote", "set-url", "origin", "git@github.com:tractat-us/bee.git")
	require.Equal(t, "github.com/tractat-us/bee", locate(t, c1).Name)
	require.Equal(t, "github.com/tractat-us/bee", locate(t, c2).Name)

	// A clone of a clone follows the local origin to the remote one.
	git(t, tmp, "clone", "-q", c1, "c3")
	require.Equal(t, "github.com/tractat-us/bee", locate(t, filepath.Join(tmp, "c3")).Name)

	// A bare origin, by path and by file:// URL.
	git(t, tmp, "clone", "-q", "--bare", src, "bare.git")
	bare := filepath.Join(tmp, "bare.git")
	git(t, tmp, "clone", "-q", bare, "c4")
	git(t, tmp, "clone", "-q", "file://"+bare, "c5")
	// A bare clone keeps its origin (src), so the chain leads to src's name.
	require.Equal(t, s.Name, locate(t, filepath.Join(tmp, "c4")).Name)
	require.Equal(t, s.Name, locate(t, filepath.Join(tmp, "c5")).Name)
	git(t, bare, "remote", "remove", "origin")
	require.Equal(t, repo.Host()+":"+bare, locate(t, filepath.Join(tmp, "c4")).Name, "without its origin, the bare repository is the end of the chain")
	require.Equal(t, repo.Host()+":"+bare, locate(t, filepath.Join(tmp, "c5")).Name)
}

func TestLocate_Worktree(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	main := newRepo(t, filepath.Join(tmp, "main"))
	wt := filepath.Join(tmp, "wt")
	git(t, main, "worktree", "add", "-q", wt, "-b", "side")

	m, w := locate(t, main), locate(t, wt)
	require.Equal(t, m.Name, w.Name, "a worktree agrees with its main checkout")
	require.Equal(t, repo.Host()+":"+filepath.Join(main, ".git"), w.Name)
	require.Equal(t, wt, w.Root)
	require.Equal(t, main, m.Root)
	agreesWithGit(t, wt, w)
	agreesWithGit(t, main, m)
	sub := locate(t, filepath.Join(wt, "src", "auth"))
	require.Equal(t, repo.Repo{Name: m.Name, Root: wt}, sub, "from inside the worktree")

	git(t, main, "remote", "add", "origin", "ssh://git@example.org:2222/team/bee.git")
	require.Equal(t, "example.org/team/bee", locate(t, wt).Name, "the worktree reads the common config")
	require.Equal(t, "example.org/team/bee", locate(t, main).Name)
}

func TestLocate_PlainFolder(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "plain")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "x"), 0o755))
	require.Equal(t, repo.Repo{Name: repo.Host() + ":" + dir, Root: dir}, locate(t, dir))
	x := filepath.Join(dir, "x")
	require.Equal(t, repo.Repo{Name: repo.Host() + ":" + x, Root: x}, locate(t, x), "each folder is its own")

	_, err := repo.Locate(filepath.Join(dir, "missing"))
	require.Error(t, err)
}

func TestLocate_Symlinked(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	src := newRepo(t, filepath.Join(tmp, "src"))
	link := filepath.Join(tmp, "link")
	require.NoError(t, os.Symlink(filepath.Join(src, "src"), link))
	require.Equal(t, locate(t, src), locate(t, link), "through a link, the repository it leads into")
}

func TestLocate_Submodule(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	lib := newRepo(t, filepath.Join(tmp, "lib"))
	git(t, lib, "remote", "add", "origin", "https://example.org/team/lib")
	app := newRepo(t, filepath.Join(tmp, "app"))
	git(t, app, "submodule", "add", "-q", lib, "vendor/lib")
	sub := filepath.Join(app, "vendor", "lib")
	fi, err := os.Lstat(filepath.Join(sub, ".git"))
	require.NoError(t, err)
	require.False(t, fi.IsDir(), "a submodule's .git is a gitdir: file")

	r := locate(t, sub)
	require.Equal(t, sub, r.Root)
	require.Equal(t, locate(t, lib).Name, r.Name, "a submodule is named by its own origin")
	agreesWithGit(t, sub, r)
}

func TestLocate_ConfigInclude(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	src := newRepo(t, filepath.Join(tmp, "src"))
	require.NoError(t, os.WriteFile(filepath.Join(src, ".git", "remote.inc"), []byte("[remote \"origin\"]\n\turl = git@example.org:team/inc.git\n"), 0o644))
	git(t, src, "config", "include.path", "remote.inc")
	require.Equal(t, "git@example.org:team/inc.git", git(t, src, "remote", "get-url", "origin"), "git sees it too")
	require.Equal(t, "example.org/team/inc", locate(t, src).Name)
}

func TestLocate_Unreadable(t *testing.T) {
	t.Parallel()
	// A .git file that names no git directory: Locate asks git, which
	// refuses, and Locate says so rather than guessing.
	dir := filepath.Join(tempDir(t), "broken")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("not a gitdir line\n"), 0o644))
	_, err := repo.Locate(dir)
	require.Error(t, err)
	require.ErrorContains(t, err, "git")
}

func TestLocate_GitDirInEnvironment(t *testing.T) {
	tmp := tempDir(t)
	src := newRepo(t, filepath.Join(tmp, "src"))
	git(t, src, "remote", "add", "origin", "https://example.org/team/env")
	plain := filepath.Join(tmp, "plain")
	require.NoError(t, os.MkdirAll(plain, 0o755))

	t.Setenv("GIT_DIR", filepath.Join(src, ".git"))
	t.Setenv("GIT_WORK_TREE", src)
	r := locate(t, plain)
	require.Equal(t, repo.Repo{Name: "example.org/team/env", Root: src}, r, "GIT_DIR decides, as it does for git")
}

func TestRemoteName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
		remote    bool
	}{
		{"https://github.com/tractat-us/bee.git", "github.com/tractat-us/bee", true},
		{"https://github.com/tractat-us/bee", "github.com/tractat-us/bee", true},
		{"https://github.com/tractat-us/bee/", "github.com/tractat-us/bee", true},
		{"https://GitHub.COM/Tractat-us/Bee.git", "github.com/tractat-us/bee", true},
		{"https://user:s3cret@github.com/tractat-us/bee.git", "github.com/tractat-us/bee", true},
		{"http://github.com:443/tractat-us/bee", "github.com/tractat-us/bee", true},
		{"git@github.com:tractat-us/bee.git", "github.com/tractat-us/bee", true},
		{"github.com:tractat-us/bee", "github.com/tractat-us/bee", true},
		{"git@github.com:/tractat-us/bee.git/", "github.com/tractat-us/bee", true},
		{"ssh://git@github.com/tractat-us/bee.git", "github.com/tractat-us/bee", true},
		{"ssh://git@github.com:22/tractat-us/bee", "github.com/tractat-us/bee", true},
		{"git+ssh://git@github.com/tractat-us/bee", "github.com/tractat-us/bee", true},
		{"git://github.com/tractat-us/bee.git", "github.com/tractat-us/bee", true},
		{"  https://github.com/tractat-us/bee.git\n", "github.com/tractat-us/bee", true},
		{"https://gitlab.com/group/sub/project.git", "gitlab.com/group/sub/project", true},
		{"ssh://git@[::1]:22/o/n.git", "::1/o/n", true},
		{"[git@host.example:2222]:o/n.git", "host.example/o/n", true},
		{"ssh://host.example/~alice/n.git", "host.example/~alice/n", true},
		{"https://example.org/a%20b/n.git", "example.org/a b/n", true},
		{"https://example.org", "example.org", true},
		{"persistent-https::https://example.org/o/n", "example.org/o/n", true},
		{"/srv/git/bee.git", "", false},
		{"../bee", "", false},
		{"bee", "", false},
		{"./a:b", "", false},
		{"file:///srv/git/bee.git", "", false},
		{"FILE:///srv/git/bee.git", "", false},
		{"C:/repos/bee", "", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, remote := repo.RemoteName(tc.url)
			require.Equal(t, tc.remote, remote)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRel(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	root := newRepo(t, filepath.Join(tmp, "repo"))
	r := locate(t, root)
	outside := filepath.Join(tmp, "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	// Links: inside pointing out, outside pointing in, inside pointing in,
	// one dangling inside, one dangling pointing out, and a loop.
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))
	require.NoError(t, os.Symlink(filepath.Join(root, "src"), filepath.Join(outside, "in")))
	require.NoError(t, os.Symlink("src/auth", filepath.Join(root, "authlink")))
	require.NoError(t, os.Symlink("../repo/src/new.go", filepath.Join(root, "dangling")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "ghost"), filepath.Join(root, "ghost")))
	require.NoError(t, os.Symlink("loop2", filepath.Join(root, "loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(root, "loop2")))

	for _, tc := range []struct {
		name, path, rel string
		inside          bool
	}{
		{"a file", filepath.Join(root, "src/auth/login.go"), "src/auth/login.go", true},
		{"a new file", filepath.Join(root, "src/auth/new.go"), "src/auth/new.go", true},
		{"a new file in new directories", filepath.Join(root, "a/b/c.go"), "a/b/c.go", true},
		{"unclean", root + "/src/./auth/../auth//login.go", "src/auth/login.go", true},
		{"unclean through a missing directory", root + "/nope/../src/x.go", "src/x.go", true},
		{"the root", root, ".", true},
		{"outside", filepath.Join(outside, "x.go"), "", false},
		{"a sibling named like the root", root + "-other/x.go", "", false},
		{"climbing out", root + "/../outside/x.go", "", false},
		{"a link inside pointing out", filepath.Join(root, "out", "x.go"), "", false},
		{"a link outside pointing in", filepath.Join(outside, "in", "auth", "login.go"), "src/auth/login.go", true},
		{"a new file through a link pointing in", filepath.Join(outside, "in", "new", "y.go"), "src/new/y.go", true},
		{"a link inside pointing inside", filepath.Join(root, "authlink", "login.go"), "src/auth/login.go", true},
		{"the link itself", filepath.Join(root, "authlink"), "src/auth", true},
		{"a dangling link inside", filepath.Join(root, "dangling"), "src/new.go", true},
		{"a dangling link pointing out", filepath.Join(root, "ghost"), "", false},
		{"dot-dot after a link follows the link", filepath.Join(outside, "in") + "/auth/../auth/login.go", "src/auth/login.go", true},
		{"under a file", filepath.Join(root, "src/auth/login.go/x"), "src/auth/login.go/x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, inside, err := repo.Rel(r, tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.inside, inside)
			require.Equal(t, tc.rel, rel)
		})
	}

	_, _, err := repo.Rel(r, "src/auth/login.go")
	require.ErrorContains(t, err, "not absolute")
	_, _, err = repo.Rel(r, filepath.Join(root, "loop1", "x"))
	require.ErrorContains(t, err, "symbolic links")

	// A Root given through a link is resolved too.
	link := filepath.Join(tmp, "rootlink")
	require.NoError(t, os.Symlink(root, link))
	rel, inside, err := repo.Rel(repo.Repo{Name: r.Name, Root: link}, filepath.Join(root, "src", "x.go"))
	require.NoError(t, err)
	require.True(t, inside)
	require.Equal(t, "src/x.go", rel)
}

func TestRel_Refuses(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	root := newRepo(t, filepath.Join(tmp, "repo"))
	// A name the system will not look up (too long) is an error, not a
	// guess: so would any other failure than "does not exist".
	_, _, err := repo.Rel(locate(t, root), filepath.Join(root, strings.Repeat("x", 300), "y.go"))
	require.Error(t, err)
	require.NoError(t, os.Symlink("loop", filepath.Join(tmp, "loop")))
	_, _, err = repo.Rel(repo.Repo{Root: filepath.Join(tmp, "loop")}, filepath.Join(root, "x"))
	require.ErrorContains(t, err, "repository root")
}

// Resolve lands where Rel judges a write to land: through links, and as
// written past what exists.
func TestResolve(t *testing.T) {
	t.Parallel()
	tmp := tempDir(t)
	root := newRepo(t, filepath.Join(tmp, "repo"))
	other := newRepo(t, filepath.Join(tmp, "other"))
	require.NoError(t, os.Symlink(filepath.Join(other, "src"), filepath.Join(root, "vendored")))
	require.NoError(t, os.Symlink(filepath.Join(other, "src", "auth", "login.go"), filepath.Join(root, "login.go")))
	for _, tc := range []struct{ name, path, want string }{
		{"a file", filepath.Join(root, "src/auth/login.go"), filepath.Join(root, "src/auth/login.go")},
		{"a new file in new directories", filepath.Join(root, "a/b/c.go"), filepath.Join(root, "a/b/c.go")},
		{"unclean", root + "/src/./auth/../auth//x.go", filepath.Join(root, "src/auth/x.go")},
		{"through a link to another repository", filepath.Join(root, "vendored/auth/new.go"), filepath.Join(other, "src/auth/new.go")},
		{"a link to a file of another repository", filepath.Join(root, "login.go"), filepath.Join(other, "src/auth/login.go")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := repo.Resolve(tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := repo.Resolve("src/x.go")
	require.ErrorContains(t, err, "not absolute")
}
