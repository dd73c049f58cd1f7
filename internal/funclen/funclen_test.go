package funclen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// limit is bee's rule: no function over 60 lines outside tests.
const limit = 60

// staying are the functions over the limit that stay, each with why. An
// entry here for a function that is no longer over the limit fails the
// test too: the list says what is true of the tree, not what once was.
var staying = map[string]string{
	"actions/boardtest/ended.go:testEndingTransitions": "test code in a non-test file (boardtest is imported by both boards' tests): one table of transitions, each a few lines",
	"internal/stdio/lines.go:members.classify":         "the JSON-RPC 2.0 validity ladder, in the order the spec states it, then the go-sdk decode cross-check; a split would scatter the ladder's order, which is the point",
	"internal/stdio/transport.go:conn.Write":           "one critical section over writeMu and mu (forget the request before its response is on the wire); splitting it would split the lock's scope across functions",
	"repo/config.go:configParser.variable":             "a hand-written scanner for git-config's key = value with quotes, escapes and continuations: one loop over a state; not split this round",
	"actions/boardtest/boardtest.go:testListFiltered":  "test code in a non-test file (the contract suite): one board set up, then a table of filters",
	"actions/boardtest/plans.go:testFanInRace":         "test code in a non-test file (the contract suite): a race set up, run and judged in one place",
	"actions/boardtest/archive.go:testEndedEveryView":  "test code in a non-test file (the contract suite), merged from the archive branch this round: one ended action followed through every view; left to its author",
	"actions/boardtest/people.go:testPeopleAnswered":   "test code in a non-test file (the contract suite): one person's answer followed through every call that shows it",
}

// Every function outside tests is at most limit lines, or stays with a
// reason in staying; run with -v to see every long one.
func TestTree_FunctionsWithinLimit(t *testing.T) {
	long, err := Over(filepath.Join("..", ".."), limit)
	require.NoError(t, err)
	var over []string
	seen := map[string]bool{}
	for _, f := range long {
		seen[f.Key()] = true
		if why, ok := staying[f.Key()]; ok {
			t.Logf("%v stays: %s", f, why)
			continue
		}
		over = append(over, f.String())
	}
	require.Empty(t, over, "over %d lines: split each into named steps, or add it to staying with the reason it stays", limit)
	for key := range staying {
		require.True(t, seen[key], "%s is in staying but no longer over %d lines: take it out", key, limit)
	}
}

func TestOver(t *testing.T) {
	root := t.TempDir()
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n-2) } // with its two brace lines, n lines
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("a/a.go", "package a\n\n// Doc lines are not counted.\nfunc fits() {\n"+body(5)+"}\n\n"+
		"func long() {\n"+body(6)+"}\n\ntype T[K any] struct{}\n\nfunc (t *T[K]) Method() {\n"+body(7)+"}\n\nfunc decl()\n")
	write("a/a_test.go", "package a\n\nfunc TestLong() {\n"+body(9)+"}\n")
	write("a/testdata/x.go", "package x\n\nfunc long() {\n"+body(9)+"}\n")
	write(".hidden/h.go", "package h\n\nfunc long() {\n"+body(9)+"}\n")
	write("b/b.go", "package b\n\nfunc edge() {\n"+body(6)+"}\n")

	got, err := Over(root, 5)
	require.NoError(t, err)
	require.Equal(t, []Func{
		{Name: "T.Method", File: "a/a.go", Line: 19, Lines: 7},
		{Name: "long", File: "a/a.go", Line: 10, Lines: 6},
		{Name: "edge", File: "b/b.go", Line: 3, Lines: 6},
	}, got)
	require.Equal(t, "a/a.go:long", got[1].Key())

	write("c/c.go", "package c\n\nfunc broken( {\n")
	_, err = Over(root, 5)
	require.ErrorContains(t, err, "c.go")
}
