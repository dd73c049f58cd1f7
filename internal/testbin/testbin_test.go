package testbin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// roleEnv makes a re-run test binary one of several making the same build
// at once; its value is the Options as JSON.
const roleEnv = "BEE_TESTBIN_MAKE"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(roleEnv); ok {
		var o Options
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		b, err := Make(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// module writes a small module into a temporary directory: a command that
// prints a constant and an embedded file, and a test file.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/hello\n\ngo 1.26\n")
	write(t, dir, "cmd/hello/main.go", `package main

import (
	"fmt"

	"example.com/hello/words"
)

var greeting = "one"

func main() { fmt.Print(greeting, " ", words.Embedded) }
`)
	write(t, dir, "words/words.go", `package words

import _ "embed"

//go:embed word.txt
var Embedded string
`)
	write(t, dir, "words/word.txt", "apple")
	write(t, dir, "words/words_test.go", "package words\n")
	write(t, dir, "README.md", "not an input\n")
	return dir
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
}

func key(t *testing.T, o Options) string {
	t.Helper()
	k, _, err := Inputs(o)
	require.NoError(t, err)
	return k
}

// The key follows every input of the build and nothing else: a change to
// a Go file, an embedded file, go.mod or the flags is a new key; a test
// file or a file no package embeds is not; the same inputs give the same
// key again.
func TestInputs_KeyFollowsTheSources(t *testing.T) {
	t.Parallel()
	dir := module(t)
	o := Options{Module: dir, Packages: []string{"./cmd/hello"}}
	first := key(t, o)
	_, files, err := Inputs(o)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"go.mod", "cmd/hello/main.go", "words/words.go", "words/word.txt"}, files)

	seen := map[string]string{first: "first"}
	change := func(what, name, text string) string {
		t.Helper()
		write(t, dir, name, text)
		k := key(t, o)
		require.NotContains(t, seen, k, "%s: the key did not change (it is the key of %s)", what, seen[k])
		seen[k] = what
		return k
	}
	main, _ := os.ReadFile(filepath.Join(dir, "cmd/hello/main.go"))
	change("a Go file", "cmd/hello/main.go", string(bytes.Replace(main, []byte(`"one"`), []byte(`"two"`), 1)))
	afterWord := change("an embedded file", "words/word.txt", "banana")
	write(t, dir, "words/words_test.go", "package words\n\n// changed\n")
	write(t, dir, "README.md", "changed\n")
	require.Equal(t, afterWord, key(t, o), "a test file and a file nothing embeds are no input")
	change("go.mod", "go.mod", "module example.com/hello\n\ngo 1.26\n\n// changed\n")

	for _, flags := range []Options{{Race: true}, {LDFlags: "-X main.greeting=three"}} {
		flags.Module, flags.Packages = o.Module, o.Packages
		k := key(t, flags)
		require.NotContains(t, seen, k, "%+v", flags)
		seen[k] = fmt.Sprintf("%+v", flags)
	}

	write(t, dir, "cmd/hello/main.go", string(main))
	write(t, dir, "words/word.txt", "apple")
	write(t, dir, "go.mod", "module example.com/hello\n\ngo 1.26\n")
	require.Equal(t, first, key(t, o), "the same inputs are the same key")
}

// bee's commands' key covers what they embed and never a test file.
func TestInputs_BeeCommands(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	require.NoError(t, err)
	_, files, err := Inputs(Options{Module: root, Packages: Commands})
	require.NoError(t, err)
	for _, want := range []string{"go.mod", "go.sum", "cmd/bee/main.go", "cmd/bee-mcp/main.go", "cmd/bee-hook/main.go",
		"internal/boardpage/templates/page.html", "internal/boardpage/static/page.js"} {
		require.Contains(t, files, want)
	}
	for _, f := range files {
		require.NotRegexp(t, `_test\.go$`, f)
	}
}

func run(t *testing.T, b Build) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(b.Dir, "hello")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// A changed source is built again before anything runs it; an unchanged
// one is taken from the cache.
func TestMake_NeverStale(t *testing.T) {
	SkipShort(t)
	t.Parallel()
	dir := module(t)
	o := Options{Module: dir, Packages: []string{"./cmd/..."}, Cache: t.TempDir()}
	b, err := Make(o)
	require.NoError(t, err)
	require.True(t, b.Made)
	require.Equal(t, "one apple", run(t, b))

	again, err := Make(o)
	require.NoError(t, err)
	require.Equal(t, Build{Dir: b.Dir, Key: b.Key}, again, "unchanged: from the cache")

	main, err := os.ReadFile(filepath.Join(dir, "cmd/hello/main.go"))
	require.NoError(t, err)
	write(t, dir, "cmd/hello/main.go", string(bytes.Replace(main, []byte(`"one"`), []byte(`"two"`), 1)))
	b, err = Make(o)
	require.NoError(t, err)
	require.True(t, b.Made)
	require.Equal(t, "two apple", run(t, b))

	write(t, dir, "words/word.txt", "cherry")
	b, err = Make(o)
	require.NoError(t, err)
	require.True(t, b.Made)
	require.Equal(t, "two cherry", run(t, b))

	o.LDFlags = "-X main.greeting=linked"
	b, err = Make(o)
	require.NoError(t, err)
	require.Equal(t, "linked cherry", run(t, b))
}

// Test binaries that want the same build at the same moment get one build
// between them.
func TestMake_OneBuildForConcurrentBinaries(t *testing.T) {
	SkipShort(t)
	t.Parallel()
	o := Options{Module: module(t), Packages: []string{"./cmd/..."}, Cache: t.TempDir()}
	spec, err := json.Marshal(o)
	require.NoError(t, err)
	const n = 4
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range n {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"="+string(spec))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	made := 0
	var dirs []string
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "%s", outs[i])
		var b Build
		require.NoError(t, json.Unmarshal(outs[i].Bytes(), &b), "%s", outs[i])
		if b.Made {
			made++
		}
		dirs = append(dirs, b.Dir)
	}
	require.Equal(t, 1, made, "one of %d made the build", n)
	for _, d := range dirs {
		require.Equal(t, dirs[0], d)
	}
	require.Equal(t, "one apple", run(t, Build{Dir: dirs[0]}))
	entries, err := os.ReadDir(o.Cache)
	require.NoError(t, err)
	require.Len(t, entries, 2, "the build and its lock; no half-made build left behind")
}

// Pruning keeps the builds of the last hour and the 8 used last (the new
// one among them), and removes the rest with their locks, and leftovers of
// failed builds.
func TestPrune(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	now := mustTime(t, "2026-01-02T12:00:00Z")
	touch := func(name string, ago time.Duration) {
		t.Helper()
		p := filepath.Join(cache, name)
		require.NoError(t, os.Mkdir(p, 0o755))
		require.NoError(t, os.Chtimes(p, now.Add(-ago), now.Add(-ago)))
	}
	touch("new", 0)
	touch("new.lock", 0)
	for i := range 10 { // b0 used 2 h ago ... b9 used 11 h ago
		name := fmt.Sprintf("b%d", i)
		touch(name, time.Duration(i+2)*time.Hour)
		touch(name+".lock", 0)
	}
	touch("recent1", 10*time.Minute)
	touch("recent2", 50*time.Minute)
	touch("b3.tmp-1", 2*time.Hour)
	touch("b4.tmp-2", time.Minute)
	touch("failed.lock", 2*time.Hour)
	touch("failing.lock", time.Minute)

	prune(cache, "new", now)
	var left []string
	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.ElementsMatch(t, []string{
		"new", "new.lock", "recent1", "recent2", // this build and those of the last hour
		"b0", "b0.lock", "b1", "b1.lock", "b2", "b2.lock", "b3", "b3.lock", "b4", "b4.lock", // 8 in all with these
		"b4.tmp-2", "failing.lock", // a build going on
	}, left)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}
