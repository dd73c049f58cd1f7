package guardflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// A denial as bee-hook --guard prints it: Claude Code's PreToolUse
// decision.
type denial struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	} `json:"hookSpecificOutput"`
}

// denied returns the reason r denied the edit with, failing the test when
// it did not deny.
func denied(t *testing.T, r hookRun) string {
	t.Helper()
	require.Equal(t, 0, r.Exit, "the guard exits 0: %+v", r)
	var d denial
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "the guard denies on stdout: %+v", r)
	require.Equal(t, "PreToolUse", d.HookSpecificOutput.HookEventName)
	require.Equal(t, "deny", d.HookSpecificOutput.PermissionDecision)
	return d.HookSpecificOutput.PermissionDecisionReason
}

// allowed fails the test unless r let the edit through without a word.
func allowed(t *testing.T, r hookRun) {
	t.Helper()
	require.Equal(t, hookRun{Exit: 0, Err: "<nil>"}, hookRun{Stdout: r.Stdout, Stderr: r.Stderr, Exit: r.Exit, Err: r.Err},
		"the guard allows silently")
}

// The edit guard with the real bridges on a board file: session A, in a
// clone, reserves src/auth/**; session B, in another worktree of the same
// clone, is denied an Edit there (and a Write of a new file there, and a
// write through a link into it), naming A and its reason, and edits
// elsewhere freely; A's own edits go through; A's /clear frees the files.
func TestGuard_AcrossWorktrees(t *testing.T) {
	repo := newRepo(t, "git@github.com:tractat-us/bee.git")
	wt := filepath.Join(filepath.Dir(repo), "wt")
	git(t, repo, "worktree", "add", "-q", wt, "-b", "side")
	require.NoError(t, os.Symlink(filepath.Join(wt, "src", "auth"), filepath.Join(wt, "authlink")))
	board, runDir := filepath.Join(t.TempDir(), "board.db"), filepath.Join(t.TempDir(), "run")
	a := start(t, repo, board, runDir)
	b := start(t, wt, board, runDir)
	guard := filepath.Join(bin, "bee-hook") + " --guard"

	var res struct {
		Reservation actions.Reservation `json:"reservation"`
	}
	r := a.tool("bee_reserve_paths", map[string]any{"paths": []string{"src/auth/**"}, "reason": "moving sessions to the store"}, &res)
	require.False(t, r.IsError, r.Text())
	require.Equal(t, "github.com/tractat-us/bee", res.Reservation.Repo)
	aID := a.identity()
	require.Equal(t, aID, res.Reservation.Holder)

	for _, tc := range []struct{ name, tool, file string }{
		{"an edit in another worktree", "Edit", filepath.Join(wt, "src/auth/login.go")},
		{"a new file", "Write", filepath.Join(wt, "src/auth/new/x.go")},
		{"through a link", "Write", filepath.Join(wt, "authlink", "login.go")},
		{"in the holder's own worktree", "Edit", filepath.Join(repo, "src/auth/login.go")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := denied(t, b.hook(hookCommand{Command: guard, Input: guardInput(tc.tool, wt, tc.file), Dir: wt}))
			require.Contains(t, why, "is reserved by "+aID)
			require.Contains(t, why, `"moving sessions to the store"`)
			require.Contains(t, why, "pattern src/auth/**")
			require.Contains(t, why, "take other work, or post to the holder")
		})
	}
	allowed(t, b.hook(hookCommand{Command: guard, Input: guardInput("Edit", wt, filepath.Join(wt, "README.md")), Dir: wt}))
	allowed(t, b.hook(hookCommand{Command: guard, Input: guardInput("Write", wt, filepath.Join(t.TempDir(), "notes.md")), Dir: wt}))
	allowed(t, a.hook(hookCommand{Command: guard, Input: guardInput("Edit", repo, filepath.Join(repo, "src/auth/login.go")), Dir: repo}))

	// /clear: the old identity, and its reservation, go.
	clear := a.hook(hookCommand{Command: filepath.Join(bin, "bee-hook"), Input: `{"session_id":"s-2","source":"clear","hook_event_name":"SessionStart"}`, Dir: repo})
	require.Equal(t, 0, clear.Exit, clear.Stderr)
	require.NotEqual(t, aID, a.identity())
	allowed(t, b.hook(hookCommand{Command: guard, Input: guardInput("Edit", wt, filepath.Join(wt, "src/auth/login.go")), Dir: wt}))
}

// The commit guard: an agent's commit asks its session's bridge; a
// person's commit, through the hook bee reservations install-git-hook
// installed, asks bee as that person. A commit that changes a path
// someone else holds is refused naming the holder; the rest goes through.
func TestPreCommit_AgentAndPerson(t *testing.T) {
	bin := built(t)
	repo := newRepo(t, "git@github.com:tractat-us/bee.git")
	wt := filepath.Join(filepath.Dir(repo), "wt")
	git(t, repo, "worktree", "add", "-q", wt, "-b", "side")
	board, runDir := filepath.Join(t.TempDir(), "board.db"), filepath.Join(t.TempDir(), "run")
	a := start(t, repo, board, runDir)
	b := start(t, wt, board, runDir)
	r := a.tool("bee_reserve_paths", map[string]any{"paths": []string{"src/auth/**"}, "reason": "moving sessions to the store"}, nil)
	require.False(t, r.IsError, r.Text())
	aID := a.identity()

	// Agent B stages a held file and a free one, and its hook refuses.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "src/auth/login.go"), []byte("package auth // b\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "README.md"), []byte("# repo, by b\n"), 0o644))
	git(t, wt, "add", ".")
	pc := b.hook(hookCommand{Command: filepath.Join(bin, "bee-hook") + " --pre-commit", Dir: wt})
	require.Equal(t, 1, pc.Exit, "%+v", pc)
	require.Contains(t, pc.Stderr, "bee: commit refused: src/auth/login.go is reserved by "+aID)
	require.Contains(t, pc.Stderr, "moving sessions to the store")
	// A's own commit of the file goes through.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src/auth/login.go"), []byte("package auth // a\n"), 0o644))
	git(t, repo, "add", ".")
	pc = a.hook(hookCommand{Command: filepath.Join(bin, "bee-hook") + " --pre-commit", Dir: repo})
	require.Equal(t, 0, pc.Exit, "%+v", pc)
	require.Empty(t, pc.Stderr)

	// A person's commits, through git itself and the installed hook.
	person := func(user string) []string {
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CLAUDE_PID=") && !strings.HasPrefix(kv, "PATH=") {
				env = append(env, kv)
			}
		}
		return append(env, "USER="+user, "LOGNAME="+user, "BEE_BOARD="+board, "BEE_RUN_DIR="+runDir, "PATH="+bin+":/usr/bin:/bin")
	}
	out, err := beeCmd(t, wt, person("tester"), "reservations", "install-git-hook").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "every worktree of this clone")
	commit := func(dir, user string) (string, error) {
		out, err := gitCmd(dir, person(user), "commit", "-q", "-m", "by "+user).CombinedOutput()
		return string(out), err
	}
	out2, err := commit(wt, "tester")
	require.Error(t, err, "the held file's commit is refused: %s", out2)
	require.Contains(t, out2, "src/auth/login.go is reserved by "+aID)
	git(t, wt, "restore", "--staged", "src/auth/login.go")
	out2, err = commit(wt, "tester")
	require.NoError(t, err, "the rest goes through: %s", out2)
	require.NotContains(t, out2, "not checked", "bee could tell")

	// A person's reservation holds the agents' and other people's commits,
	// and never its own.
	out, err = beeCmd(t, wt, person("ann"), "reserve", "--reason", "rewriting the intro", "README.md").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(wt, "README.md"), []byte("# repo, again\n"), 0o644))
	git(t, wt, "add", "README.md")
	out2, err = commit(wt, "tester")
	require.Error(t, err, "%s", out2)
	require.Contains(t, out2, "README.md is reserved by user:ann")
	pc = b.hook(hookCommand{Command: filepath.Join(bin, "bee-hook") + " --pre-commit", Dir: wt})
	require.Equal(t, 1, pc.Exit, "%+v", pc)
	require.Contains(t, pc.Stderr, "README.md is reserved by user:ann")
	out2, err = commit(wt, "ann")
	require.NoError(t, err, "ann's own: %s", out2)
}
