package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// writePlan writes a plan file and returns its path.
func writePlan(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// said is what bee prints on stderr for err, and the exit code.
func said(err error) (string, int) {
	var buf bytes.Buffer
	code := exitCode(err, &buf)
	return buf.String(), code
}

const diamondPlan = `[
	{"key": "schema", "to": "db", "title": "Migrate the schema", "body": "all of it", "priority": 1},
	{"key": "svc-a", "title": "Update service A", "after": ["schema"]},
	{"key": "svc-b", "title": "Update service B", "after": ["schema"]},
	{"key": "load", "title": "Run the load test", "after": ["svc-a", "svc-b"]}
]`

func TestPost_AfterAndPriority(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "first")
	out := bee(t, path, "post", "--after", "a-1", "--priority", "0", "second")
	require.Equal(t, "posted a-2 for anyone: second (blocked until a-1 is done)\n", out)
	var rec actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "show", "--json", "a-2")), &rec))
	require.Equal(t, actions.Blocked, rec.State)
	require.Equal(t, 0, rec.Priority)
	require.Equal(t, []string{"a-1"}, rec.After)
	out = bee(t, path, "post", "--after", "a-1, a-2", "third")
	require.Contains(t, out, "(blocked until a-1, a-2 are done)")
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "show", "--json", "a-1")), &rec))
	require.Equal(t, actions.DefaultPriority, rec.Priority)

	for _, tc := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"post", "--priority", "7", "x"}, exitUsage, []string{"priority 7", "0..4"}},
		{[]string{"post", "--priority", "high", "x"}, exitUsage, []string{`"high" is not a whole number`}},
		{[]string{"post", "--after", "a-99", "x"}, exitNo, []string{"a-99"}},
		{[]string{"post", "--after", "seven", "x"}, exitUsage, []string{`"seven"`}},
		{[]string{"post", "--after", "a-1,,a-2", "x"}, exitUsage, []string{"an empty id"}},
	} {
		_, _, err := run(t, path, "", tc.args...)
		text, code := said(err)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, text)
		for _, s := range tc.says {
			require.Contains(t, text, s, tc.args)
		}
		require.NotContains(t, text, ": priority out of range", "the sentinel's name is not repeated")
	}
	// An action after one that was cancelled could never open: refused.
	bee(t, path, "cancel", "a-1")
	_, _, err := run(t, path, "", "post", "--after", "a-1", "fourth")
	text, code := said(err)
	require.Equal(t, exitNo, code, text)
	require.Contains(t, text, "a-1")
	require.Contains(t, text, "cancelled")
}

func TestPost_Plan(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "already there")
	out := bee(t, path, "post", "--plan", writePlan(t, diamondPlan))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 7, out)
	require.Contains(t, lines[0], "posted a plan of 4 actions")
	require.Regexp(t, `^KEY\s+ID\s+STATE\s+FOR\s+TITLE$`, lines[1])
	require.Regexp(t, `^schema\s+a-2\s+open\s+db\s+Migrate the schema$`, lines[2])
	require.Regexp(t, `^svc-a\s+a-3\s+blocked \(after a-2\)\s+anyone\s+Update service A$`, lines[3])
	require.Regexp(t, `^load\s+a-5\s+blocked \(after a-3, a-4\)\s+anyone\s+Run the load test$`, lines[5])
	require.Contains(t, lines[6], "bee plan a-2")
	require.Contains(t, lines[6], "bee wait a-5 waits for its end")

	// From stdin, as JSON; after may name an existing id.
	var posted actions.PostedPlan
	stdout, _, err := run(t, path, `[{"key":"x","title":"after the diamond","after":["a-5"]},{"key":"y","title":"y","after":["x"]}]`,
		"post", "--plan", "-", "--json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(stdout), &posted))
	require.Equal(t, map[string]string{"x": "a-6", "y": "a-7"}, posted.IDs)
	require.Len(t, posted.Records, 2)
	require.Equal(t, []string{"a-5"}, posted.Records[0].After)
	require.Equal(t, actions.Blocked, posted.Records[1].State)
}

func TestPost_PlanRefusals(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "first")
	bee(t, path, "cancel", "a-1")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		says  []string
	}{
		{"a cycle and a duplicate, each named on its own line", []string{"--plan", "-"},
			`[{"key":"a","title":"A","after":["c"]},{"key":"b","title":"B","after":["a"]},{"key":"c","title":"C","after":["b"]},{"key":"c","title":"again"}]`,
			exitUsage, []string{"nothing was posted (2 problems):\n  - entry #", `"a" → "c" → "b" → "a"`, "\n  - entry #4 (key \"c\")", "Try: fix each entry named"}},
		{"an unknown id", []string{"--plan", "-"}, `[{"key":"a","title":"A","after":["a-99"]}]`, exitNo, []string{"a-99"}},
		{"a cancelled prerequisite", []string{"--plan", "-"}, `[{"key":"a","title":"A","after":["a-1"]}]`, exitNo, []string{"a-1", "cancelled"}},
		{"not JSON", []string{"--plan", "-"}, "[{\"key\":\"a\",\n \"title\": nope}]", exitUsage, []string{"not a JSON array of steps: line 2:"}},
		{"an unknown field", []string{"--plan", "-"}, `[{"key":"a","title":"A","whom":"b"}]`, exitUsage, []string{`unknown field "whom"`}},
		{"two values", []string{"--plan", "-"}, `[] []`, exitUsage, []string{"more than one JSON value"}},
		{"no file", []string{"--plan", filepath.Join(t.TempDir(), "nope.json")}, "", exitUsage, []string{"cannot read the plan", "nope.json"}},
		{"a title beside", []string{"--plan", "-", "title"}, `[]`, exitUsage, []string{"--plan takes no title"}},
		{"--to beside", []string{"--plan", "-", "--to", "x"}, `[]`, exitUsage, []string{"go in the plan's steps"}},
		{"empty", []string{"--plan", "-"}, `[]`, exitUsage, []string{"at least one entry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, path, tc.stdin, append([]string{"post"}, tc.args...)...)
			text, code := said(err)
			require.Equal(t, tc.code, code, text)
			for _, s := range tc.says {
				require.Contains(t, text, s)
			}
		})
	}
	var recs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "list", "--all", "--json")), &recs))
	require.Len(t, recs, 1, "nothing but the first action was ever posted")
}

func TestList_Blocked(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "--plan", writePlan(t, diamondPlan))
	bee(t, path, "post", "lone")
	out := bee(t, path, "list", "--state", "blocked")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	for i, id := range []string{"a-2", "a-3", "a-4"} {
		require.Regexp(t, `^`+id+`\s+blocked\s`, lines[i+1])
	}
	out = bee(t, path, "list")
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 6, "the default list shows blocked actions too: %s", out)
	_, _, err := run(t, path, "", "list", "--state", "waiting")
	text, code := said(err)
	require.Equal(t, exitUsage, code)
	require.Contains(t, text, "blocked")
}

func TestShow_PrerequisitesAndDependents(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "--plan", writePlan(t, diamondPlan))
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	w := identity.ID("agent:db#0000000d")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: w, PID: os.Getpid()}))
	out := bee(t, path, "show", "a-2")
	require.Regexp(t, `priority:\s+2\n`, out)
	require.Regexp(t, `prerequisites \(it waits for these to be done\):\n  a-1\s+open\s+Migrate the schema\n`, out)
	require.Regexp(t, `dependents \(these wait for it\):\n  a-4\s+blocked\s+Run the load test\n`, out)
	out = bee(t, path, "show", "a-4")
	require.Regexp(t, `prerequisites[^\n]*:\n  a-2\s+blocked\s+Update service A\n  a-3\s+blocked\s+Update service B\n`, out)
	require.NotContains(t, out, "dependents")

	var shown struct {
		actions.Record
		Prerequisites []planLink `json:"prerequisites"`
		Dependents    []planLink `json:"dependents"`
	}
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "show", "--json", "a-1")), &shown))
	require.Equal(t, "a-1", shown.ID)
	require.Equal(t, 1, shown.Priority)
	require.Empty(t, shown.Prerequisites)
	require.Equal(t, []planLink{{"a-2", actions.Blocked, "Update service A"}, {"a-3", actions.Blocked, "Update service B"}}, shown.Dependents)

	// As steps end, show says so.
	claim(t, b, w)
	_, err = b.Finish(t.Context(), w, "a-1", "done")
	require.NoError(t, err)
	require.Regexp(t, `a-1\s+done\s+Migrate the schema`, bee(t, path, "show", "a-2"))
}

func TestPlan_Tree(t *testing.T) {
	t.Parallel()
	path := boardPath(t)
	bee(t, path, "post", "--plan", writePlan(t, diamondPlan))
	bee(t, path, "post", "lone")
	out := bee(t, path, "plan", "a-3")
	want := "a-1 [open] Migrate the schema (for db)\n" +
		"├─ a-2 [blocked by a-1] Update service A\n" +
		"│  └─ a-4 [blocked by a-2, a-3] Run the load test\n" +
		"└─ a-3 [blocked by a-1] Update service B  <-\n" +
		"   └─ a-4 (shown above)\n"
	first, tree, _ := strings.Cut(out, "\n")
	require.Contains(t, first, "plan of a-3 on ")
	require.Contains(t, first, "4 actions: 1 open, 3 blocked")
	require.Equal(t, want, tree)

	var g actions.PlanGraph
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "plan", "--json", "a-4")), &g))
	require.Len(t, g.Records, 4)
	require.ElementsMatch(t, []actions.PlanEdge{{Before: "a-1", After: "a-2"}, {Before: "a-1", After: "a-3"}, {Before: "a-2", After: "a-4"}, {Before: "a-3", After: "a-4"}}, g.Edges)

	// A lone action is a plan of one.
	first, tree, _ = strings.Cut(bee(t, path, "plan", "a-5"), "\n")
	require.Contains(t, first, "1 action: 1 open")
	require.Equal(t, "a-5 [open] lone  <-\n", tree)

	_, _, err := run(t, path, "", "plan", "a-99")
	text, code := said(err)
	require.Equal(t, exitNo, code)
	require.Contains(t, text, `no action "a-99"`)
	_, _, err = run(t, path, "", "plan")
	requireUsage(t, err, "want one action id")
	require.Contains(t, bee(t, path, "plan", "--help"), "bee plan [--json] ID")
}
