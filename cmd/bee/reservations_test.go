package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/githook"
)

// gitRepo makes a git repository whose origin is url in a fresh folder,
// with src/auth/login.go, and returns its root, symlink-free.
func gitRepo(t *testing.T, url string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "auth"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "auth", "login.go"), []byte("package auth\n"), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", url}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	return dir
}

// runIn runs bee in-process in the folder dir, as user (USER), against
// the board at path.
func runIn(t *testing.T, dir, user, path, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Dir: dir,
		Getenv: testEnv(map[string]string{"USER": user})}
	err := m.Run(t.Context(), append([]string{"--board", path}, args...))
	var msg bytes.Buffer
	exitCode(err, &msg)
	return stdout.String(), stderr.String() + msg.String(), err
}

func TestMain_ReserveListRelease(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	path := newBoard(t)
	const name = "github.com/tractat-us/bee"

	out, errOut, err := runIn(t, filepath.Join(dir, "src"), "tester", path, "", "reserve", "src/auth/**", "docs/auth.md", "--reason", "reworking the login")
	require.NoError(t, err, errOut)
	require.Equal(t, "reserved r-1 in "+name+" for user:tester (exclusive): src/auth/** docs/auth.md\n", out)

	out, _, err = runIn(t, dir, "tester", path, "", "reservations")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, "reservations in "+name, lines[0])
	require.Regexp(t, `^ID\s+HOLDER\s+KIND\s+AGE\s+ACTION\s+PATHS\s+REASON$`, lines[1])
	require.Regexp(t, `^r-1\s+user:tester\s+exclusive\s+\d+s\s+-\s+src/auth/\*\* docs/auth.md\s+reworking the login$`, lines[2])

	// From anywhere, by name; and every repository's.
	elsewhere := t.TempDir()
	out, _, err = runIn(t, elsewhere, "tester", path, "", "reservations", "--repo", name, "--json")
	require.NoError(t, err)
	var rs []actions.Reservation
	require.NoError(t, json.Unmarshal([]byte(out), &rs))
	require.Len(t, rs, 1)
	require.Equal(t, []string{"src/auth/**", "docs/auth.md"}, rs[0].Patterns)
	out, _, err = runIn(t, elsewhere, "tester", path, "", "reservations")
	require.NoError(t, err)
	require.Contains(t, out, "no reservations in ")
	out, _, err = runIn(t, elsewhere, "tester", path, "", "reservations", "--all")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ID\s+REPO\s+HOLDER`, out)
	require.Contains(t, out, name)

	// Another person is refused, naming who holds what and why; the
	// refusal is whole.
	_, errOut, err = runIn(t, dir, "ann", path, "", "reserve", "README.md", "src/auth/login.go", "--reason", "typo")
	require.Equal(t, exitNo, exitOf(err), errOut)
	require.Contains(t, errOut, "nothing was reserved")
	require.Contains(t, errOut, "user:tester holds src/auth/**")
	require.Contains(t, errOut, "reworking the login")
	require.Contains(t, errOut, "Try: bee reservations")
	_, _, err = runIn(t, dir, "ann", path, "", "reserve", "--shared", "docs", "--reason", "notes")
	require.Equal(t, exitNo, exitOf(err), "a shared reservation overlapping an exclusive one is refused")
	out, _, err = runIn(t, dir, "ann", path, "", "reservations", "--json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &rs))
	require.Len(t, rs, 1, "nothing of ann's refused reservations was granted")

	// Patterns the board refuses are the command line's fault, named.
	for _, bad := range []string{"../x", "/etc/passwd", "a//b"} {
		_, errOut, err = runIn(t, dir, "ann", path, "", "reserve", bad, "--reason", "r")
		require.Equal(t, exitUsage, exitOf(err), errOut)
		require.Contains(t, errOut, `"`+bad+`"`)
	}

	// The commit guard's question, as a person, on stdin and as arguments.
	login := filepath.Join(dir, "src", "auth", "login.go")
	req, err := json.Marshal(wire.CheckPathsRequest{Paths: []string{login, filepath.Join(dir, "README.md")}, Tool: wire.ToolGitCommit, Cwd: dir})
	require.NoError(t, err)
	out, _, err = runIn(t, elsewhere, "ann", path, string(req), "reservations", "check", "--json")
	require.NoError(t, err)
	var a wire.CheckPathsAnswer
	require.NoError(t, json.Unmarshal([]byte(out), &a))
	require.NoError(t, a.Validate())
	require.False(t, a.Allow)
	require.Len(t, a.Conflicts, 1)
	require.Equal(t, wire.PathConflict{Path: login, Repo: name, Holder: "user:tester", Pattern: "src/auth/**", Exclusive: true,
		Reason: "reworking the login", Since: rs[0].Since}, a.Conflicts[0])
	require.Equal(t, 1, strings.Count(out, "\n"), "one line")
	out, _, err = runIn(t, elsewhere, "tester", path, string(req), "reservations", "check", "--json")
	require.NoError(t, err)
	require.Equal(t, "{\"allow\":true}\n", out, "your own reservations never hold you")
	out, _, err = runIn(t, filepath.Join(dir, "src"), "ann", path, "", "reservations", "check", "auth/login.go", "auth/new.go")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(login)+`\s+user:tester\s+src/auth/\*\*`, out)
	require.Contains(t, out, filepath.Join(dir, "src/auth/new.go"), "a file not yet written is held too")
	out, _, err = runIn(t, dir, "ann", path, "", "reservations", "check", "README.md")
	require.NoError(t, err)
	require.Equal(t, "no reservation of anyone else holds these paths\n", out)

	// Releasing some, then the rest, then nothing.
	out, _, err = runIn(t, dir, "tester", path, "", "release", "docs/auth.md")
	require.NoError(t, err)
	require.Equal(t, "released docs/auth.md from r-1 in "+name+"\n", out)
	out, _, err = runIn(t, dir, "tester", path, "", "release", "--json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &rs))
	require.Len(t, rs, 1)
	require.Equal(t, []string{"src/auth/**"}, rs[0].Patterns)
	out, _, err = runIn(t, dir, "tester", path, "", "release")
	require.NoError(t, err)
	require.Equal(t, "nothing to release: user:tester holds nothing in "+name+" (bee reservations shows what is held)\n", out)
	out, _, err = runIn(t, dir, "ann", path, string(req), "reservations", "check", "--json")
	require.NoError(t, err)
	require.Equal(t, "{\"allow\":true}\n", out)
}

// An action posted with paths carries them, in the repository of the
// working directory; held back by a person's reservation, bee post, list
// and show say by whom.
func TestMain_PostPaths(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "https://github.com/tractat-us/bee")
	path := newBoard(t)
	_, errOut, err := runIn(t, dir, "ann", path, "", "reserve", "src/auth", "--reason", "mine for now")
	require.NoError(t, err, errOut)

	out, errOut, err := runIn(t, dir, "tester", path, "", "post", "--paths", "src/auth/**, docs/auth.md", "rework the login")
	require.NoError(t, err, errOut)
	require.Equal(t, "posted a-1 for anyone: rework the login\nheld back: user:ann holds src/auth (r-1); nobody takes it until that is released\n", out)
	_, _, err = runIn(t, dir, "tester", path, "", "post", "free one")
	require.NoError(t, err)

	out, _, err = runIn(t, dir, "tester", path, "", "list")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^ID\s+STATE\s+FOR\s+FROM\s+HOLDER\s+AGE\s+PATHS\s+TITLE$`, lines[0])
	require.Regexp(t, `^a-1\s+open\s+anyone\s+user:tester\s+held back by user:ann\s+\d+s\s+src/auth/\*\* docs/auth.md\s+rework the login$`, lines[1])
	require.Regexp(t, `^a-2\s+open\s+anyone\s+user:tester\s+-\s+\d+s\s+-\s+free one$`, lines[2])

	out, _, err = runIn(t, dir, "tester", path, "", "show", "a-1")
	require.NoError(t, err)
	require.Regexp(t, `paths:\s+src/auth/\*\* docs/auth.md \(in github.com/tractat-us/bee\)`, out)
	require.Regexp(t, `held back:\s+user:ann holds src/auth \(r-1\); nobody takes it until that is released`, out)
	var rec actions.Record
	out, _, err = runIn(t, dir, "tester", path, "", "show", "--json", "a-1")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, "github.com/tractat-us/bee", rec.Repo)
	require.Equal(t, []string{"src/auth/**", "docs/auth.md"}, rec.Paths)
	require.Equal(t, []actions.HeldBack{{Reservation: "r-1", Holder: "user:ann", Pattern: "src/auth"}}, rec.HeldBackBy)

	_, _, err = runIn(t, dir, "ann", path, "", "release")
	require.NoError(t, err)
	out, _, err = runIn(t, dir, "tester", path, "", "show", "a-1")
	require.NoError(t, err)
	require.NotContains(t, out, "held back")

	for _, args := range [][]string{
		{"post", "--paths", " , ", "t"},
		{"post", "--paths", "../x", "t"},
		{"post", "--repo", dir, "t"},
	} {
		_, errOut, err := runIn(t, dir, "tester", path, "", args...)
		require.Equal(t, exitUsage, exitOf(err), "%q: %s", args, errOut)
	}
}

// install-git-hook installs the hook that runs the bee-hook beside bee (or
// on PATH), says so, and never overwrites a hook that is not bee's.
func TestMain_InstallGitHook(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	bin := t.TempDir()
	beeHook := filepath.Join(bin, "bee-hook")
	require.NoError(t, os.WriteFile(beeHook, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	install := func(args ...string) (string, int) {
		cmd := beeProc(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, append([]string{"reservations", "install-git-hook"}, args...)...)
		cmd.Dir = filepath.Join(dir, "src")
		out, err := cmd.CombinedOutput()
		return string(out), exitStatus(t, err)
	}
	out, code := install()
	require.Equal(t, exitOK, code, out)
	hook := filepath.Join(dir, ".git", "hooks", "pre-commit")
	require.Contains(t, out, "installed bee's pre-commit hook "+hook)
	data, err := os.ReadFile(hook)
	require.NoError(t, err)
	require.Contains(t, string(data), githook.Marker)
	require.Contains(t, string(data), beeHook)

	out, code = install("--json")
	require.Equal(t, exitOK, code, out)
	var r struct {
		Path    string `json:"path"`
		Written bool   `json:"written"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, hook, r.Path)
	require.False(t, r.Written, "installed already")

	mine := "#!/bin/sh\necho my own hook\n"
	require.NoError(t, os.WriteFile(hook, []byte(mine), 0o755))
	out, code = install()
	require.Equal(t, exitNo, code, out)
	require.Contains(t, out, beeHook+" --pre-commit || exit $?")
	require.Contains(t, out, "nothing was installed")
	data, err = os.ReadFile(hook)
	require.NoError(t, err)
	require.Equal(t, mine, string(data))

	cmd := beeProc(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, "reservations", "install-git-hook")
	cmd.Dir = t.TempDir()
	outb, err := cmd.CombinedOutput()
	require.Equal(t, exitNo, exitStatus(t, err), "outside git: %s", outb)
	require.Contains(t, string(outb), "Try: run it inside a git worktree")
}

// With no board yet, nothing is reserved: a person's commit goes ahead
// without a warning. A request that is not one is the command line's
// fault.
func TestMain_ReservationsCheckNoBoard(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	missing := filepath.Join(t.TempDir(), "board.db")
	req := `{"paths":["` + filepath.Join(dir, "x.go") + `"],"tool":"git-commit","cwd":"` + dir + `"}`
	out, errOut, err := runIn(t, dir, "ann", missing, req, "reservations", "check", "--json")
	require.NoError(t, err, errOut)
	require.Equal(t, "{\"allow\":true}\n", out)
	require.NoFileExists(t, missing)

	for _, stdin := range []string{"", "not json", `{"paths":["relative.go"]}`, `{"paths":[]}`} {
		_, errOut, err := runIn(t, dir, "ann", missing, stdin, "reservations", "check", "--json")
		require.Equal(t, exitUsage, exitOf(err), "%q: %s", stdin, errOut)
	}
}
