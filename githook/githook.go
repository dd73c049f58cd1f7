// Package githook installs bee's git pre-commit hook, which runs
// `bee-hook --pre-commit` so that a commit changing a path another live
// identity holds exclusively is refused (see hooks.PreCommit). It is the
// logic of `bee reservations install-git-hook`.
//
// It promises never to overwrite a hook that is not bee's: a pre-commit
// hook already there (a file without bee's Marker line, or any symbolic
// link) is left as it is, and Install says which line to add to it
// instead. It installs where git runs hooks from: core.hooksPath when set
// (a relative one is taken from the worktree's top, as git does), else the
// hooks folder of the git common directory, which every worktree of a
// clone shares. It writes the hook atomically (a temporary file, then a
// rename), mode 0755.
package githook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Marker is the line that marks a pre-commit hook as bee's: Install
// replaces a hook that holds it, and no other.
const Marker = "# bee pre-commit hook: installed by `bee reservations install-git-hook`."

// Script returns bee's pre-commit hook, which runs the bee-hook at beeHook
// (an absolute path), or, when that is gone, the bee-hook on PATH, and lets
// the commit through with a warning when there is none.
func Script(beeHook string) string {
	return `#!/bin/sh
` + Marker + `
# It refuses a commit that changes a path another live bee identity holds
# exclusively, naming the path and its holder; when bee cannot tell, the
# commit goes ahead with a warning. Delete this file to remove it.
installed=` + shellQuote(beeHook) + `
bee_hook=$installed
if [ ! -x "$bee_hook" ]; then
	bee_hook=$(command -v bee-hook) || {
		echo "bee: bee-hook is neither at $installed nor on PATH; commit not checked against reservations" >&2
		exit 0
	}
fi
exec "$bee_hook" --pre-commit
`
}

// Line is the line to add to a pre-commit hook that is not bee's, so that
// it runs bee's check too (and stops the commit when the check refuses).
func Line(beeHook string) string {
	return shellQuote(beeHook) + " --pre-commit || exit $?"
}

// A Result says what Install did.
type Result struct {
	// Path is the pre-commit hook's file.
	Path string
	// Written is true when Install wrote the hook: there was none, or an
	// older one of bee's.
	Written bool
	// Replaced is true when the file Install wrote replaced an older hook
	// of bee's.
	Replaced bool
	// Foreign is true when a hook that is not bee's is there: Install left
	// it as it is, and AddLine is the line to add to it.
	Foreign bool
	AddLine string
	// Shared says who else the hook applies to: every worktree of the
	// clone (the common hooks folder), or only this worktree (a relative
	// core.hooksPath), or the folder core.hooksPath names.
	Shared string
}

// Install installs bee's pre-commit hook, running the bee-hook at beeHook
// (an absolute path), in the repository dir is in. It runs git to find
// where git runs hooks from. See the package comment for what it never
// overwrites. It returns an error when dir is not in a git worktree, or
// when the hook cannot be read or written.
func Install(ctx context.Context, dir, beeHook string) (Result, error) {
	if !filepath.IsAbs(beeHook) {
		return Result{}, fmt.Errorf("install git hook: bee-hook path %q is not absolute", beeHook)
	}
	out, err := git(ctx, dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir", "--git-path", "hooks")
	if err != nil {
		return Result{}, fmt.Errorf("install git hook: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		return Result{}, fmt.Errorf("install git hook: git rev-parse said %q, not a top, a common directory and a hooks folder", out)
	}
	common, hooksDir := lines[1], lines[2]
	res := Result{Path: filepath.Join(hooksDir, "pre-commit"), AddLine: Line(beeHook)}
	hooksPath, _ := git(ctx, dir, "config", "--get", "core.hooksPath") // exit 1: not set
	switch hp := strings.TrimSpace(hooksPath); {
	case hp == "" || filepath.Clean(hooksDir) == filepath.Join(common, "hooks"):
		res.Shared = "every worktree of this clone (the git common directory's hooks)"
	case !filepath.IsAbs(hp) && !strings.HasPrefix(hp, "~"):
		res.Shared = fmt.Sprintf("this worktree only: core.hooksPath (%s) is relative, so each worktree has its own; run this in each", hp)
	default:
		res.Shared = fmt.Sprintf("every repository whose core.hooksPath is %s", hp)
	}

	want := Script(beeHook)
	fi, err := os.Lstat(res.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return res, fmt.Errorf("install git hook: %w", err)
	case !fi.Mode().IsRegular():
		res.Foreign = true // a link (a hook manager's) or something stranger: not ours
		return res, nil
	default:
		have, err := os.ReadFile(res.Path)
		if err != nil {
			return res, fmt.Errorf("install git hook: %w", err)
		}
		if !bytes.Contains(have, []byte(Marker)) {
			res.Foreign = true
			return res, nil
		}
		if string(have) == want && fi.Mode().Perm()&0o111 != 0 {
			return res, nil // installed already, as it would be now
		}
		res.Replaced = true
	}
	if err := os.MkdirAll(hooksDir, 0o755); err != nil {
		return res, fmt.Errorf("install git hook: %w", err)
	}
	if err := writeFile(res.Path, []byte(want)); err != nil {
		return res, fmt.Errorf("install git hook: %w", err)
	}
	res.Written = true
	return res, nil
}

// FindBeeHook returns the bee-hook beside exe (the bee command's own
// executable: go install puts them in one folder), else the one on PATH,
// as an absolute path.
func FindBeeHook(exe string) (string, error) {
	if exe != "" {
		p := filepath.Join(filepath.Dir(exe), "bee-hook")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	p, err := exec.LookPath("bee-hook")
	if err != nil {
		return "", errors.New("no bee-hook beside bee or on PATH; install it with: go install github.com/tractat-us/bee/cmd/bee-hook@latest")
	}
	return filepath.Abs(p)
}

// writeFile writes data to path atomically, mode 0755: a temporary file in
// the same folder, then a rename.
func writeFile(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".pre-commit.bee-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o755); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Describe says what Install did, in a few lines for a person.
func Describe(r Result) string {
	var b strings.Builder
	switch {
	case r.Foreign:
		fmt.Fprintf(&b, "%s is not bee's, so it was left as it is. To have it check reservations too, add this line to it:\n\n    %s\n\n", r.Path, r.AddLine)
	case r.Replaced:
		fmt.Fprintf(&b, "updated bee's pre-commit hook %s\n", r.Path)
	case r.Written:
		fmt.Fprintf(&b, "installed bee's pre-commit hook %s\n", r.Path)
	default:
		fmt.Fprintf(&b, "bee's pre-commit hook %s is installed already\n", r.Path)
	}
	if r.Shared != "" {
		fmt.Fprintf(&b, "It applies to %s.\n", r.Shared)
	}
	if !r.Foreign {
		b.WriteString("A commit that changes a path another live identity holds exclusively is now refused, naming it; `git commit --no-verify` skips the check.\n")
	}
	return b.String()
}
