package repo_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tractat-us/bee/repo"
)

// The layouts Locate reads at every bridge start and guard call: a
// worktree's subdirectory (a .git file, commondir, the common config)
// and a clone's.
func benchLayouts(b *testing.B) map[string]string {
	tmp := tempDir(b)
	main := newRepo(b, filepath.Join(tmp, "main"))
	git(b, main, "remote", "add", "origin", "git@github.com:tractat-us/bee.git")
	wt := filepath.Join(tmp, "wt")
	git(b, main, "worktree", "add", "-q", wt, "-b", "side")
	return map[string]string{
		"clone":    filepath.Join(main, "src", "auth"),
		"worktree": filepath.Join(wt, "src", "auth"),
	}
}

func BenchmarkLocate(b *testing.B) {
	for name, dir := range benchLayouts(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := repo.Locate(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGitRevParse is what Locate would cost by running git instead:
// the top directory and common directory, then the origin.
func BenchmarkGitRevParse(b *testing.B) {
	for name, dir := range benchLayouts(b) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel", "--git-common-dir").Run(); err != nil {
					b.Fatal(err)
				}
				if err := exec.Command("git", "-C", dir, "config", "--get", "remote.origin.url").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRel(b *testing.B) {
	dir := benchLayouts(b)["worktree"]
	r, err := repo.Locate(dir)
	if err != nil {
		b.Fatal(err)
	}
	for name, p := range map[string]string{
		"existing": filepath.Join(dir, "login.go"),
		"new":      filepath.Join(dir, "new", "file.go"),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := repo.Rel(r, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
