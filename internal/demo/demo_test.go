package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/internal/testtime"
)

// builtDemo builds bee, bee-mcp, bee-hook and bee-demo once for every test
// that runs them (testbin); scripts/demo runs them through BEE_DEMO_BIN
// instead of building its own.
var builtDemo = sync.OnceValues(func() (testbin.Build, error) {
	return testbin.Make(testbin.Options{
		Packages: append(slices.Clone(testbin.Commands), "github.com/tractat-us/bee/internal/cmd/bee-demo"),
	})
})

// bin returns the directory of the built commands, skipping t under
// -short.
func bin(t *testing.T) string {
	t.Helper()
	testbin.SkipShort(t)
	b, err := builtDemo()
	require.NoError(t, err, "build the commands for the demo")
	return b.Dir
}

// goEnv pins Go's caches for the script, whose HOME is a fresh directory:
// without it a build there would start from an empty cache.
var goEnv = sync.OnceValues(func() ([]string, error) {
	var env []string
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			return nil, fmt.Errorf("go env %s: %w", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return env, nil
})

// script runs scripts/demo with args in a private HOME and TMPDIR, plus
// env, and returns its stdout, its stderr and its exit status.
func script(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	home, tmp := t.TempDir(), t.TempDir()
	goVars, err := goEnv()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "demo"), args...)
	cmd.Env = append(os.Environ(), "BEE_DEMO_BIN="+bin(t), "HOME="+home, "TMPDIR="+tmp, "USER=tester", "BEE_BOARD=")
	cmd.Env = append(append(cmd.Env, goVars...), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if code < 0 {
		require.NoError(t, err)
	}
	require.NoDirExists(t, filepath.Join(home, ".bee"), "the demo touched ~/.bee\nstdout:\n%s\nstderr:\n%s", &out, &errOut)
	left, _ := filepath.Glob(filepath.Join(tmp, "bee-demo.*"))
	require.Empty(t, left, "the demo leaves no temporary directory behind")
	return out.String(), errOut.String(), code
}

// someoneElsesWork is a board with work on it that is none of the demo's:
// for agent "demo" (the name the demo used to claim under), for other
// agents, claimed by a live identity, and done. With forAnyone, an open
// action for anyone too.
func someoneElsesWork(t *testing.T, forAnyone bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	ctx := t.Context()
	alice := actions.Poster("user:alice")
	_, err = b.Post(ctx, alice, actions.Draft{To: "demo", Title: "for agent demo", Body: "not the demo's"})
	require.NoError(t, err)
	_, err = b.Post(ctx, alice, actions.Draft{To: "reviewer", Title: "for reviewer"})
	require.NoError(t, err)
	worker := identity.ID("agent:worker#12345678")
	require.NoError(t, b.Join(ctx, actions.Member{ID: worker, PID: os.Getpid()}))
	_, err = b.Post(ctx, alice, actions.Draft{To: "worker", Title: "claimed by worker"})
	require.NoError(t, err)
	_, err = b.Post(ctx, alice, actions.Draft{To: "worker", Title: "done by worker"})
	require.NoError(t, err)
	for range 2 {
		p, err := b.Next(ctx, worker, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		if p.Records[0].Title == "done by worker" {
			_, err = b.Finish(ctx, worker, p.Records[0].ID, "finished")
			require.NoError(t, err)
		}
	}
	if forAnyone {
		_, err = b.Post(ctx, alice, actions.Draft{Title: "for anyone", Body: "someone's real work"})
		require.NoError(t, err)
	}
	return path
}

// records returns every action on the board at path.
func records(t *testing.T, path string) []actions.Record {
	t.Helper()
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	var all []actions.Record
	for cursor := actions.Cursor(""); ; {
		p, err := b.List(t.Context(), cursor)
		require.NoError(t, err)
		if len(p.Records) == 0 {
			return all
		}
		all = append(all, p.Records...)
		cursor = p.Cursor
	}
}

// By default the demo runs on a fresh board of its own: a board $BEE_BOARD
// names, even one with work for anyone on it, is left exactly as it was.
func TestDemo_OwnBoardByDefault(t *testing.T) {
	path := someoneElsesWork(t, true)
	before := records(t, path)
	stdout, stderr, code := script(t, []string{"BEE_BOARD=" + path})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Equal(t, before, records(t, path), "the demo left the board $BEE_BOARD names alone")
	require.Contains(t, stdout, "note: BEE_BOARD is set ("+path+"); the demo leaves that board alone.")
	require.Regexp(t, `board: +\S+/bee-demo\.\w+/board\.db\n +a fresh board for this demo, removed when it ends`, stdout)

	// It reads as a story, in the order of its steps, with the tools named.
	steps := regexp.MustCompile(`(?m)^(\d)\. `).FindAllStringSubmatch(stdout, -1)
	var order []string
	for _, s := range steps {
		order = append(order, s[1])
	}
	require.Equal(t, []string{"1", "2", "3", "4", "5"}, order, stdout)
	for _, want := range []string{
		"bee_finish_action, bee_list_actions, bee_list_reservations,",
		"bee_wait_action {\"timeoutSeconds\":10}",
		"-> claimed a-1, the action the person posted.",
		"\"title\": \"Say hello\"",
		"   |   \"next\": \"You hold action a-1 now:",
		"\"state\": \"done\"",
		"Hello from the demo agent!",
	} {
		require.Contains(t, stdout, want)
	}
	require.Regexp(t, `state: +done by agent:demo-[0-9a-f]{6}#[0-9a-f]{8}`, stdout)
}

// On a board the user names, the demo finishes the action it posted and
// leaves every other action exactly as it was, and its bridge leaves no
// member behind.
func TestDemo_SharedBoardLeavesOtherWorkAlone(t *testing.T) {
	path := someoneElsesWork(t, false)
	before := records(t, path)
	stdout, stderr, code := script(t, nil, "--board", path)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "the board you named; the demo touches only the action it posts")

	after := records(t, path)
	require.Len(t, after, len(before)+1)
	require.Equal(t, before, after[:len(before)], "every action that was on the board is as it was")
	mine := after[len(before)]
	require.Regexp(t, `^demo-[0-9a-f]{6}$`, mine.To)
	require.Equal(t, "user:tester", mine.From)
	require.Equal(t, actions.Done, mine.State)
	require.Equal(t, "Hello from the demo agent!", mine.Result)
	require.Equal(t, mine.To, identity.ID(mine.Holder).Agent())

	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	members, err := b.Members(t.Context())
	require.NoError(t, err)
	require.Len(t, members, 1, "only the worker is live: the demo's bridge departed")
	require.Equal(t, identity.ID("agent:worker#12345678"), members[0].ID)
}

// A named board where the demo's bridge could take work for anyone first
// is refused, before anything is posted, with the reason.
func TestDemo_RefusesBoardWithWorkForAnyone(t *testing.T) {
	path := someoneElsesWork(t, true)
	before := records(t, path)
	stdout, stderr, code := script(t, nil, "--board", path)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stderr, "demo failed: the board at "+path+" has actions for anyone that are not done: a-5 (open).")
	require.Contains(t, stderr, "Run scripts/demo without --board")
	require.Equal(t, before, records(t, path))
}

// Without BEE_DEMO_BIN the script builds and installs the commands itself,
// as a newcomer runs it, and says what the first build costs. This is the
// demo's one real go build of its own (every other test takes testbin's);
// it shares the build cache, so it compiles nothing the tests did not.
func TestDemo_BuildsWhatItRuns(t *testing.T) {
	gobin := t.TempDir()
	stdout, stderr, code := script(t, []string{"BEE_DEMO_BIN=", "GOBIN=" + gobin})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "== building bee, bee-mcp and bee-hook into "+gobin+"\n")
	require.Contains(t, stdout, "about 1.5 minutes on 2 idle\n   cores, 10 or more on a busy machine; a line every 15 s says what it is doing.")
	require.Regexp(t, `\n   built in \d+ s\n`, stdout)
	require.Contains(t, stdout, "note: "+gobin+" is not on your PATH")
	require.Contains(t, stdout, "\"state\": \"done\"")
	for _, name := range []string{"bee", "bee-mcp", "bee-hook"} {
		require.FileExists(t, filepath.Join(gobin, name))
	}
	require.NoFileExists(t, filepath.Join(gobin, "bee-demo"), "the demo's own driver is not installed")
}

// fakeGo writes a go command into a new folder and returns the folder: it
// answers go env, and its go install -v and go build -v print what real
// go prints (a module download, then the packages as they start) over
// about four seconds, then put the real commands (from bin) where real go
// would. With fail it prints a compile error instead, and fails.
func fakeGo(t *testing.T, gobin string, fail bool) string {
	t.Helper()
	dir, bin := t.TempDir(), bin(t)
	failing := ""
	if fail {
		failing = `printf '# github.com/tractat-us/bee/cmd/bee\ncmd/bee/main.go:1:1: expected package, found oops\n' >&2; exit 1`
	}
	script := `#!/bin/sh
case "$1 $2" in
"env GOBIN") echo "` + gobin + `" ;;
"env GOPATH") echo "` + filepath.Dir(gobin) + `" ;;
"env GOVERSION") echo go1.26.0 ;;
"install -v")
  echo "go: downloading modernc.org/sqlite v1.40.0" >&2; sleep 2
  echo "internal/goarch" >&2; echo "modernc.org/sqlite/lib" >&2; sleep 2
  ` + failing + `
  cp "` + bin + `/bee" "` + bin + `/bee-mcp" "` + bin + `/bee-hook" "` + gobin + `/" ;;
"build -v") echo "github.com/tractat-us/bee/internal/cmd/bee-demo" >&2; cp "` + bin + `/bee-demo" "$4" ;;
*) echo "fake go: unexpected $*" >&2; exit 1 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755))
	return dir
}

// A first build is slow (minutes on a busy machine), so the script says
// what it is doing at a steady interval: here every second, in a build of
// four.
func TestDemo_BuildSaysWhatItDoes(t *testing.T) {
	gobin := t.TempDir()
	path := fakeGo(t, gobin, false) + string(os.PathListSeparator) + os.Getenv("PATH")
	stdout, stderr, code := script(t, []string{"BEE_DEMO_BIN=", "PATH=" + path, "BEE_DEMO_PROGRESS_EVERY=1"})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	progress := regexp.MustCompile(`(?m)^   \.\.\. (\d+) s: (.*)$`).FindAllStringSubmatch(stdout, -1)
	require.GreaterOrEqual(t, len(progress), 2, "a line a second in a build of four:\n%s", stdout)
	var said []string
	for _, p := range progress {
		said = append(said, p[2])
	}
	require.Contains(t, said, "downloading modernc.org/sqlite v1.40.0")
	require.Contains(t, said, "compiling modernc.org/sqlite/lib")
	require.Regexp(t, `\n   built in \d+ s\n`, stdout)
	require.Contains(t, stdout, "\"state\": \"done\"")
}

// A failed build shows go's error, not the packages it compiled, and says
// what to do.
func TestDemo_BuildFails(t *testing.T) {
	gobin := t.TempDir()
	path := fakeGo(t, gobin, true) + string(os.PathListSeparator) + os.Getenv("PATH")
	stdout, stderr, code := script(t, []string{"BEE_DEMO_BIN=", "PATH=" + path})
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stderr, "cmd/bee/main.go:1:1: expected package, found oops")
	require.Contains(t, stderr, "scripts/demo: the build failed (above)")
	require.NotContains(t, stderr, "modernc.org/sqlite/lib", "go -v's package lines are not an error")
}

func TestDemo_BadCommandLine(t *testing.T) {
	_, stderr, code := script(t, nil, "--bored", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "unknown argument '--bored'")
	_, stderr, code = script(t, nil, "--board")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--board needs a path")
}

// The last line of defence: should the bridge claim anything but the
// demo's own action (here an older action for anyone on a board the demo
// was wrongly told is its own), the demo gives it back at once and fails,
// saying so.
func TestRun_ClaimOfOtherWorkIsGivenBack(t *testing.T) {
	defer testtime.VerifyNoLeaks(t)
	path := someoneElsesWork(t, true)
	dir := t.TempDir()
	var out bytes.Buffer
	err := Run(context.Background(), Config{Bin: bin(t), Board: path, RunDir: filepath.Join(dir, "run"), Out: &out})
	require.Error(t, err)
	require.Regexp(t, `^the bridge claimed a-5 \("for anyone" from user:alice\), not the demo's a-6; it gave it back at once: it is open again, as it was\. And the demo cancelled its own a-6$`, err.Error())

	after := records(t, path)
	require.Equal(t, "a-5", after[4].ID)
	require.Equal(t, actions.Open, after[4].State)
	require.Empty(t, after[4].Holder)
	require.Equal(t, "a-6", after[5].ID)
	require.Equal(t, actions.Cancelled, after[5].State)
}

func TestRun_MissingCommands(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := Run(t.Context(), Config{Bin: dir, Board: filepath.Join(dir, "board.db"), RunDir: filepath.Join(dir, "run"), Out: &out})
	require.ErrorContains(t, err, "bee is not in "+dir+" (build it: go install ./cmd/...)")
	require.NoFileExists(t, filepath.Join(dir, "board.db"))
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"/tmp/a-b.db":    "/tmp/a-b.db",
		"Say hello":      "'Say hello'",
		"it's":           `'it'\''s'`,
		"":               "''",
		"demo-1a2b3c":    "demo-1a2b3c",
		"--board=/x y/z": "'--board=/x y/z'",
	} {
		require.Equal(t, want, quote(in), "%q", in)
	}
	require.True(t, strings.HasPrefix(quoteAll([]string{"post", "a b"}), "post 'a b'"))
}
