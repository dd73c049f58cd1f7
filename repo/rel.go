package repo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symbolic links one path may go through, as the
// kernel's ELOOP does.
const maxLinks = 40

// Rel returns the repo-relative, '/'-separated path of the file a tool
// would write at absPath, and whether that file is inside r at all. The
// path is judged by where the write would land:
//
//   - it is cleaned first (as a tool resolving the path it is given
//     would), then every symbolic link along it is followed, those in
//     the middle and a last one alike, so a link inside the repository
//     that points outside it is outside, and a link outside that points in
//     is inside, at the path it points to;
//   - the part that does not exist yet (a Write of a new file, in a new
//     directory) is taken as written, after the longest prefix that
//     exists; a dangling link counts as the file it would create.
//
// The root itself is ".". A path outside r returns "", false. It returns
// an error, never a guess, for a relative absPath, a loop of links (or
// more than 40), and a directory along the path it may not look into; and
// when r.Root itself cannot be resolved.
func Rel(r Repo, absPath string) (rel string, inside bool, err error) {
	target, err := Resolve(absPath)
	if err != nil {
		return "", false, err
	}
	root, err := resolve(r.Root)
	if err != nil {
		return "", false, fmt.Errorf("repository root: %w", err)
	}
	rel, err = filepath.Rel(root, target)
	if err != nil {
		return "", false, fmt.Errorf("path %s against repository root %s: %w", absPath, root, err)
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false, nil
	}
	return filepath.ToSlash(rel), true, nil
}

// Resolve returns the absolute, symlink-free path a write to absPath
// would land at, as Rel judges it: absPath cleaned, every symbolic link
// along it followed, and the part that does not exist yet taken as
// written. Rel(r, p) is Resolve(p) made relative to r's resolved root; a
// caller that must first find the repository of where a write lands (a
// link may point into another one) resolves once with Resolve and
// locates the result's directory. It returns Rel's errors.
func Resolve(absPath string) (string, error) {
	if !filepath.IsAbs(absPath) {
		return "", fmt.Errorf("path %q is not absolute; give the full path of the file", absPath)
	}
	return resolve(filepath.Clean(absPath))
}

// resolve follows every symbolic link along the absolute path p, one
// component at a time as the kernel does, and appends what does not exist
// as written.
func resolve(p string) (string, error) {
	todo := splitPath(p)
	cur := "/"
	missing := false // past the longest prefix that exists
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch {
		case c == "." || c == "":
			continue
		case c == "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			missing = true
			cur = next
			continue
		case err != nil:
			return "", fmt.Errorf("resolve %s: %w", p, err)
		case fi.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("resolve %s: more than %d symbolic links (a loop?)", p, maxLinks)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(splitPath(target), todo...)
	}
	return cur, nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}
