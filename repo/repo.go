// Package repo names the repository a directory belongs to, so that every
// clone and worktree of one repository, on one machine or many, agree on
// the name their reservations are kept under; and it turns the path a tool
// would write into the repo-relative path reservations speak of.
//
// # The name
//
// In a git worktree the name comes from its `origin` remote, normalised to
// host/owner/name (see RemoteName): every clone of one repository agrees,
// whatever the URL's form. An origin that is a local path (or file://) is
// named as the repository it points to would be, so clones of a local
// repository agree with it. Without an origin, the name is
// "<host>:<git common directory>", which every worktree of one clone
// shares. Outside git it is "<host>:<directory>". Host is the machine's
// hostname.
//
// # Cheap enough for every hook
//
// Locate reads the files git itself reads (the `.git` directory or file,
// `commondir`, and the `config` of the common directory) and spawns
// nothing. It runs git (`git rev-parse`, `git config`) only for a layout
// it does not read: GIT_DIR, GIT_WORK_TREE or GIT_COMMON_DIR set in the
// environment, or a `.git` that is neither a directory with HEAD nor a
// file pointing at one.
//
// What it does not do that git does: it follows `[include] path` in the
// repository's config but not `[includeIf]`; it reads neither the global
// nor the system config, nor `config.worktree`, so an origin set only
// there is not seen; it applies no `url.<base>.insteadOf` rewriting (the
// forms that rewriting maps between normalise to the same name anyway);
// it does not stop at file-system boundaries or GIT_CEILING_DIRECTORIES;
// and a bare repository (or the inside of a .git directory) counts as a
// plain folder.
package repo

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// A Repo is where a directory's files belong.
type Repo struct {
	// Name is the repository's name, the same for every clone and worktree
	// of it; see the package comment.
	Name string
	// Root is the absolute, symlink-free top directory of the worktree
	// (where repo-relative paths start), or the directory itself outside
	// git.
	Root string
}

// Host is this machine's hostname, as names that are paths start with it
// ("localhost" when the system will not say).
func Host() string { return host() }

var host = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
})

// maxLocalHops bounds how many local origins Locate follows (a clone of a
// clone of ...) before naming the repository by its common directory.
const maxLocalHops = 8

// Locate returns the repository dir belongs to. dir may be relative (to
// the working directory) and may go through symbolic links; Root is
// resolved. Outside git, Root is dir and Name "<host>:<dir>". It returns an
// error when dir does not exist, or when git had to be run and failed.
func Locate(dir string) (Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Repo{}, fmt.Errorf("locate repository of %s: %w", dir, err)
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return Repo{}, fmt.Errorf("locate repository of %s: %w", dir, err)
	}
	if os.Getenv("GIT_DIR") != "" || os.Getenv("GIT_WORK_TREE") != "" || os.Getenv("GIT_COMMON_DIR") != "" {
		return locateByGit(abs)
	}
	root, common, err := findWorktree(abs)
	switch {
	case errors.Is(err, errUnreadable):
		return locateByGit(abs)
	case err != nil:
		return Repo{}, fmt.Errorf("locate repository of %s: %w", dir, err)
	case root == "":
		return Repo{Name: host() + ":" + abs, Root: abs}, nil
	}
	name, err := nameOf(common, root, 0)
	if err != nil {
		return Repo{}, fmt.Errorf("locate repository of %s: %w", dir, err)
	}
	return Repo{Name: name, Root: root}, nil
}

// errUnreadable: a git layout Locate does not read itself.
var errUnreadable = errors.New("git layout not read directly")

// findWorktree walks up from dir (absolute, symlink-free) to the first
// directory with a `.git`, and returns that directory and the git common
// directory (symlink-free); root is "" when there is none.
func findWorktree(dir string) (root, common string, err error) {
	for d := dir; ; {
		common, ok, err := gitDirAt(d)
		if err != nil || ok {
			if ok {
				root = d
			}
			return root, common, err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", nil
		}
		d = parent
	}
}

// gitDirAt reports whether d has a `.git` and returns its common
// directory. A `.git` that is neither a git directory nor a `gitdir:` file
// naming one is errUnreadable.
func gitDirAt(d string) (common string, ok bool, err error) {
	dotgit := filepath.Join(d, ".git")
	fi, err := os.Stat(dotgit)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("%s: %w", dotgit, err)
	}
	gitDir := dotgit
	if !fi.IsDir() {
		raw, err := os.ReadFile(dotgit)
		if err != nil {
			return "", false, fmt.Errorf("read %s: %w", dotgit, err)
		}
		target, found := strings.CutPrefix(strings.TrimSpace(string(raw)), "gitdir:")
		if !found {
			return "", false, fmt.Errorf("%s has no gitdir line: %w", dotgit, errUnreadable)
		}
		gitDir = strings.TrimSpace(target)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(d, gitDir)
		}
	}
	common, err = commonDir(gitDir)
	if err != nil {
		return "", false, err
	}
	return common, true, nil
}

// commonDir returns the symlink-free common directory of gitDir, which
// must hold HEAD (errUnreadable otherwise).
func commonDir(gitDir string) (string, error) {
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		return "", fmt.Errorf("%s is not a git directory (%w): %w", gitDir, err, errUnreadable)
	}
	common := gitDir
	raw, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	switch {
	case err == nil:
		common = strings.TrimSpace(string(raw))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read commondir of %s: %w", gitDir, err)
	}
	resolved, err := filepath.EvalSymlinks(common)
	if err != nil {
		return "", fmt.Errorf("git common directory of %s: %w: %w", gitDir, err, errUnreadable)
	}
	return resolved, nil
}

// nameOf names the repository whose common directory is common: by its
// origin, else "<host>:<common>". A relative local origin is taken from
// root, the worktree's top.
func nameOf(common, root string, hops int) (string, error) {
	url, err := originURL(filepath.Join(common, "config"))
	if err != nil {
		return "", err
	}
	if url == "" {
		return host() + ":" + common, nil
	}
	if name, ok := RemoteName(url); ok {
		return name, nil
	}
	return localName(localPath(url, root), hops+1)
}

// localName names the repository at the local path p (an origin): as
// nameOf would from its own worktree or git directory, or "<host>:<p>"
// when p is no repository (or the chain of local origins is too long).
func localName(p string, hops int) (string, error) {
	if resolved, err := filepath.EvalSymlinks(p); err == nil {
		p = resolved
	}
	if hops > maxLocalHops {
		return host() + ":" + p, nil
	}
	common, ok, err := gitDirAt(p)
	if err != nil || !ok {
		// Not a worktree: a bare repository or a .git directory?
		if c, err := commonDir(p); err == nil {
			common, ok = c, true
		}
	}
	if !ok {
		return host() + ":" + p, nil
	}
	return nameOf(common, p, hops)
}

// localPath turns a local origin URL (a path or file://) into an absolute
// path, a relative one taken from root.
func localPath(url, root string) string {
	p := strings.TrimPrefix(url, "file://")
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, rest)
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	return filepath.Clean(p)
}

// locateByGit is Locate by running git, for layouts Locate does not read.
func locateByGit(dir string) (Repo, error) {
	out, err := git(dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		if strings.Contains(err.Error(), "not a git repository") {
			return Repo{Name: host() + ":" + dir, Root: dir}, nil
		}
		return Repo{}, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return Repo{}, fmt.Errorf("git rev-parse in %s said %q, not a top directory and a common directory", dir, out)
	}
	root, common := lines[0], lines[1]
	for _, p := range []*string{&root, &common} {
		if r, err := filepath.EvalSymlinks(*p); err == nil {
			*p = r
		}
	}
	// Exit status 1 is "no such key"; the first URL is the one git fetches
	// from.
	urls, _ := git(dir, "config", "--get-all", "remote.origin.url")
	url, _, _ := strings.Cut(strings.TrimSpace(urls), "\n")
	if url == "" {
		return Repo{Name: host() + ":" + common, Root: root}, nil
	}
	if name, ok := RemoteName(url); ok {
		return Repo{Name: name, Root: root}, nil
	}
	name, err := localName(localPath(url, root), 1)
	if err != nil {
		return Repo{}, fmt.Errorf("locate repository of %s: %w", dir, err)
	}
	return Repo{Name: name, Root: root}, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
