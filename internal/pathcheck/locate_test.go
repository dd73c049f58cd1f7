package pathcheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/pathcheck"
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
	os.Exit(m.Run())
}

// tempDir is t.TempDir with its symbolic links resolved, as Roots are.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// newRepo makes a repository at dir whose origin is url, with
// src/auth/login.go in its worktree.
func newRepo(t testing.TB, dir, url string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "auth"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "auth", "login.go"), []byte("package auth\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"remote", "add", "origin", url}} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	return dir
}

func locate(t testing.TB, dir string) repo.Repo {
	t.Helper()
	r, err := repo.Locate(dir)
	require.NoError(t, err)
	return r
}

func TestLocator_Place(t *testing.T) {
	tmp := tempDir(t)
	bee := newRepo(t, filepath.Join(tmp, "bee"), "git@github.com:tractat-us/bee.git")
	other := newRepo(t, filepath.Join(tmp, "other"), "https://github.com/tractat-us/other")
	plain := filepath.Join(tmp, "plain")
	require.NoError(t, os.MkdirAll(filepath.Join(plain, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(other, "src"), filepath.Join(bee, "vendored")))
	require.NoError(t, os.Symlink(filepath.Join(other, "src", "auth", "login.go"), filepath.Join(bee, "login.go")))
	require.NoError(t, os.Symlink(filepath.Join(bee, "src"), filepath.Join(plain, "beesrc")))
	require.NoError(t, os.WriteFile(filepath.Join(plain, "notes.md"), nil, 0o644))

	const beeName, otherName = "github.com/tractat-us/bee", "github.com/tractat-us/other"
	home := locate(t, bee)
	require.Equal(t, beeName, home.Name)
	l := pathcheck.NewLocator(&pathcheck.Options{Home: home})
	for _, tc := range []struct {
		name, path string
		want       pathcheck.Place
		ok         bool
	}{
		{"a file of the session's repository", filepath.Join(bee, "src/auth/login.go"), pathcheck.Place{Repo: beeName, Rel: "src/auth/login.go"}, true},
		{"a new file in new directories", filepath.Join(bee, "src/new/deep/x.go"), pathcheck.Place{Repo: beeName, Rel: "src/new/deep/x.go"}, true},
		{"a file at the root", filepath.Join(bee, "README.md"), pathcheck.Place{Repo: beeName, Rel: "README.md"}, true},
		{"a file of another repository", filepath.Join(other, "src/auth/login.go"), pathcheck.Place{Repo: otherName, Rel: "src/auth/login.go"}, true},
		{"through a directory link into another repository", filepath.Join(bee, "vendored/auth/new.go"), pathcheck.Place{Repo: otherName, Rel: "src/auth/new.go"}, true},
		{"a file link into another repository", filepath.Join(bee, "login.go"), pathcheck.Place{Repo: otherName, Rel: "src/auth/login.go"}, true},
		{"a link from a plain folder into the repository", filepath.Join(plain, "beesrc/auth/login.go"), pathcheck.Place{Repo: beeName, Rel: "src/auth/login.go"}, true},
		{"under a file", filepath.Join(bee, "src/auth/login.go/x"), pathcheck.Place{Repo: beeName, Rel: "src/auth/login.go/x"}, true},
		{"a plain folder that is not the session's", filepath.Join(plain, "notes.md"), pathcheck.Place{}, false},
		{"a new file of a plain folder", filepath.Join(plain, "sub/new/x.md"), pathcheck.Place{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := l.Place(tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}

	_, _, err := l.Place("src/auth/login.go")
	require.ErrorContains(t, err, "not absolute")
	require.NoError(t, os.Symlink("loop2", filepath.Join(bee, "loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(bee, "loop2")))
	_, _, err = l.Place(filepath.Join(bee, "loop1", "x.go"))
	require.ErrorContains(t, err, "symbolic links")
}

// A session started in a plain folder reserves paths of that folder: the
// files in it (and in its subfolders, which repo.Locate names on their
// own) are placed in it; a git repository inside it is its own.
func TestLocator_PlainHome(t *testing.T) {
	tmp := tempDir(t)
	plain := filepath.Join(tmp, "notes")
	require.NoError(t, os.MkdirAll(filepath.Join(plain, "drafts"), 0o755))
	inner := newRepo(t, filepath.Join(plain, "code"), "git@github.com:tractat-us/code.git")
	home := locate(t, plain)
	require.True(t, pathcheck.Plain(home))
	require.False(t, pathcheck.Plain(locate(t, inner)))
	// A worktree without an origin is named by its git common directory,
	// never taken for a plain folder.
	bare := filepath.Join(tmp, "noorigin")
	require.NoError(t, os.MkdirAll(bare, 0o755))
	require.NoError(t, exec.Command("git", "-C", bare, "init", "-q").Run())
	require.False(t, pathcheck.Plain(locate(t, bare)))

	l := pathcheck.NewLocator(&pathcheck.Options{Home: home})
	for _, tc := range []struct {
		name, path string
		want       pathcheck.Place
		ok         bool
	}{
		{"a file of the folder", filepath.Join(plain, "todo.md"), pathcheck.Place{Repo: home.Name, Rel: "todo.md"}, true},
		{"a file of a subfolder", filepath.Join(plain, "drafts/a.md"), pathcheck.Place{Repo: home.Name, Rel: "drafts/a.md"}, true},
		{"a new subfolder", filepath.Join(plain, "new/b.md"), pathcheck.Place{Repo: home.Name, Rel: "new/b.md"}, true},
		{"a repository inside it", filepath.Join(inner, "src/x.go"), pathcheck.Place{Repo: "github.com/tractat-us/code", Rel: "src/x.go"}, true},
		{"another plain folder", filepath.Join(tmp, "elsewhere.md"), pathcheck.Place{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := l.Place(tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// A directory's repository is found once per TTL, whichever file of it
// is asked about, and found again after the TTL.
func TestLocator_Caches(t *testing.T) {
	tmp := tempDir(t)
	bee := newRepo(t, filepath.Join(tmp, "bee"), "git@github.com:tractat-us/bee.git")
	var mu sync.Mutex
	asked := map[string]int{}
	now := time.Unix(1e9, 0)
	l := pathcheck.NewLocator(&pathcheck.Options{
		TTL: time.Minute,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Locate: func(dir string) (repo.Repo, error) {
			mu.Lock()
			asked[dir]++
			mu.Unlock()
			return repo.Locate(dir)
		},
	})
	auth := filepath.Join(bee, "src", "auth")
	for _, f := range []string{"login.go", "logout.go", "new/x.go"} {
		p, ok, err := l.Place(filepath.Join(auth, f))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "src/auth/"+f, p.Rel)
	}
	mu.Lock()
	require.Equal(t, 1, asked[auth], "src/auth located once for three files")
	require.Equal(t, 1, asked[filepath.Join(auth, "new")], "a missing directory is looked for, and not kept")
	now = now.Add(time.Minute)
	mu.Unlock()
	_, _, err := l.Place(filepath.Join(auth, "login.go"))
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, 2, asked[auth], "located again once the TTL has passed")
	mu.Unlock()

	// A folder that becomes a repository is seen once the TTL passes.
	plain := filepath.Join(tmp, "later")
	require.NoError(t, os.MkdirAll(plain, 0o755))
	_, ok, err := l.Place(filepath.Join(plain, "x.go"))
	require.NoError(t, err)
	require.False(t, ok)
	newRepo(t, plain, "git@github.com:tractat-us/later.git")
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	p, ok, err := l.Place(filepath.Join(plain, "x.go"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, pathcheck.Place{Repo: "github.com/tractat-us/later", Rel: "x.go"}, p)
}
