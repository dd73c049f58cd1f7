package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/repo"
)

// workDir is the directory bee works in: Main.Dir, else the process's.
func (e *env) workDir() (string, error) {
	if e.main.Dir != "" {
		return e.main.Dir, nil
	}
	return os.Getwd()
}

// repoName is the repository a reservations command (bee reserve,
// release, reservations, post --paths) speaks of: --repo, which is a
// directory (whose repository it is) or a repository's name as bee
// reservations prints it, else the working directory's (see package repo:
// every clone and worktree of one repository has one name). cmd names the
// command in errors.
func (e *env) repoName(cmd, flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		wd, err := e.workDir()
		if err != nil {
			return "", fmt.Errorf("bee %s: which repository? the working directory: %w (give --repo)", cmd, err)
		}
		dir = wd
	}
	if e.main.Dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(e.main.Dir, dir)
	}
	if fi, err := os.Stat(dir); flagValue != "" && (err != nil || !fi.IsDir()) {
		if err := actions.CheckRepo(flagValue); err != nil {
			return "", &cliError{code: exitUsage, err: err,
				msg:  fmt.Sprintf("bee %s: --repo %q is neither a folder nor a repository's name, which is plain text of at most %d bytes", cmd, flagValue, actions.MaxRepoLen),
				hint: "give a folder of the repository, or its name as bee reservations --all prints it"}
		}
		return flagValue, nil // a name
	}
	r, err := repo.Locate(dir)
	if err != nil {
		return "", fmt.Errorf("bee %s: which repository is %s in? %w (give --repo)", cmd, dir, err)
	}
	return r.Name, nil
}

// repoFlagUsage is what --repo says of itself.
const repoFlagUsage = "the repository: a folder of it, or its name as bee reservations --all prints it (default the working directory's)"
