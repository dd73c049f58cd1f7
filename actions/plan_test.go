package actions_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/identity"
)

const poster identity.ID = "agent:lead#0123abcd"

func prio(n int) *int { return &n }

func entry(key string, after ...string) actions.PlanEntry {
	return actions.PlanEntry{Key: key, Title: "do " + key, After: after}
}

func keysOf(steps []actions.PlanStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Key)
	}
	return out
}

func TestCheckPlan_Orders(t *testing.T) {
	// Keys named in any order; ties keep the order given.
	steps, err := actions.CheckPlan(poster, []actions.PlanEntry{
		entry("test", "migrate", "svc-a", "svc-b"),
		entry("svc-a", "migrate"),
		entry("docs"),
		entry("svc-b", "migrate", "a-7"),
		entry("migrate", "a-3"),
	})
	require.NoError(t, err)
	require.Equal(t, []string{"docs", "migrate", "svc-a", "svc-b", "test"}, keysOf(steps))
	require.Equal(t, []string{"a-3"}, steps[1].AfterIDs)
	require.Equal(t, []string{"migrate"}, steps[3].AfterKeys)
	require.Equal(t, []string{"a-7"}, steps[3].AfterIDs)
	require.Equal(t, 0, steps[4].Index, "Index is the place given")
	require.Equal(t, []string{"migrate", "svc-a", "svc-b"}, steps[4].AfterKeys)

	// An order already right is kept.
	steps, err = actions.CheckPlan(poster, []actions.PlanEntry{entry("a"), entry("b", "a"), entry("c")})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, keysOf(steps))
}

func TestCheckPlan_Normalises(t *testing.T) {
	steps, err := actions.CheckPlan(poster, []actions.PlanEntry{
		{Key: "a", Title: "  first  ", Body: "b", To: "reviewer", Priority: prio(0), Repo: "r", Paths: []string{"./src/auth/", "src/auth", "docs/*.md"}},
		{Key: "b", Title: "second", After: []string{"a", "a", "a-1", "a-1"}},
	})
	require.NoError(t, err)
	require.Equal(t, "first", steps[0].Title)
	require.Equal(t, 0, steps[0].Priority, "0 given is 0, the most urgent")
	require.Equal(t, actions.DefaultPriority, steps[1].Priority, "none given is the default")
	require.Equal(t, []pathglob.Pattern{pathglob.MustParse("src/auth"), pathglob.MustParse("docs/*.md")}, steps[0].Paths)
	require.Nil(t, steps[1].Paths)
	require.Equal(t, []string{"a"}, steps[1].AfterKeys, "repeats count once")
	require.Equal(t, []string{"a-1"}, steps[1].AfterIDs)
	require.Equal(t, "reviewer", steps[0].To)
}

func TestPlanEntry_JSON(t *testing.T) {
	var plan []actions.PlanEntry
	require.NoError(t, json.Unmarshal([]byte(`[
		{"key": "a", "title": "A", "priority": 0},
		{"key": "b", "title": "B", "after": ["a", "a-4"], "repo": "r", "paths": ["src/**"]}
	]`), &plan))
	require.NotNil(t, plan[0].Priority)
	require.Equal(t, 0, *plan[0].Priority)
	require.Nil(t, plan[1].Priority, "absent is nil, not 0")
	steps, err := actions.CheckPlan(poster, plan)
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, []int{steps[0].Priority, steps[1].Priority})
	require.Equal(t, "r", steps[1].Repo)
}

// refusal checks that err is a *PlanError wrapping ErrBadPlan and want,
// whose message says each of says.
func refusal(t *testing.T, err error, want error, says ...string) *actions.PlanError {
	t.Helper()
	require.Error(t, err)
	var pe *actions.PlanError
	require.True(t, errors.As(err, &pe), "a *PlanError: %v", err)
	require.ErrorIs(t, err, actions.ErrBadPlan)
	require.ErrorIs(t, err, want)
	require.Contains(t, err.Error(), "nothing was posted")
	for _, s := range says {
		require.Contains(t, err.Error(), s)
	}
	return pe
}

func TestCheckPlan_Refuses(t *testing.T) {
	many := func(n int) []actions.PlanEntry {
		out := make([]actions.PlanEntry, n)
		for i := range out {
			out[i] = entry(fmt.Sprintf("k%d", i))
		}
		return out
	}
	manyAfter := make([]string, actions.MaxAfter+1)
	for i := range manyAfter {
		manyAfter[i] = fmt.Sprintf("a-%d", i+1)
	}
	for _, tc := range []struct {
		name string
		who  identity.ID
		plan []actions.PlanEntry
		want error
		says []string
	}{
		{"empty plan", poster, nil, actions.ErrBadPlan, []string{"at least one entry"}},
		{"too many entries", poster, many(actions.MaxPlan + 1), actions.ErrPlanTooLarge, []string{"1001 entries, more than 1000"}},
		{"duplicate key", poster, []actions.PlanEntry{entry("a"), entry("b"), entry("a")}, actions.ErrDuplicateKey,
			[]string{`entry #3 (key "a")`, "entry #1's too"}},
		{"empty key", poster, []actions.PlanEntry{entry("a"), entry("")}, actions.ErrBadKey, []string{"entry #2: no key"}},
		{"key with a space", poster, []actions.PlanEntry{entry("a b")}, actions.ErrBadKey, []string{`key "a b"`, `' '`}},
		{"key with a slash", poster, []actions.PlanEntry{entry("a/b")}, actions.ErrBadKey, []string{`'/'`}},
		{"key too long", poster, []actions.PlanEntry{entry(strings.Repeat("k", actions.MaxKeyLen+1))}, actions.ErrBadKey, []string{"more than 64"}},
		{"key like an action id", poster, []actions.PlanEntry{entry("a-3")}, actions.ErrBadKey, []string{"looks like an action id"}},
		{"unknown key", poster, []actions.PlanEntry{entry("a", "b")}, actions.ErrUnknownPrerequisite,
			[]string{`after "b" is neither a key of this plan nor an action id`}},
		{"bare number", poster, []actions.PlanEntry{entry("a", "7")}, actions.ErrUnknownPrerequisite, []string{"a-7"}},
		{"wrong case", poster, []actions.PlanEntry{entry("Build"), entry("b", "build")}, actions.ErrUnknownPrerequisite, []string{`"Build"?`}},
		{"malformed id", poster, []actions.PlanEntry{entry("a", "a-07"), entry("b", "a-0"), entry("c", "a-")}, actions.ErrUnknownPrerequisite,
			[]string{`"a-07"`, `"a-0"`, `"a-"`}},
		{"empty after item", poster, []actions.PlanEntry{entry("a", "")}, actions.ErrUnknownPrerequisite, []string{`after ""`}},
		{"self cycle", poster, []actions.PlanEntry{entry("a", "a")}, actions.ErrCycle, []string{`"a" → "a"`}},
		{"cycle of three", poster, []actions.PlanEntry{entry("x"), entry("a", "c"), entry("b", "a"), entry("c", "b", "x")}, actions.ErrCycle,
			[]string{`entry #2 (key "a")`, `"a" → "c" → "b" → "a"`}},
		{"too many prerequisites", poster, []actions.PlanEntry{entry("a", manyAfter...)}, actions.ErrTooManyPrerequisites, []string{"65 prerequisites, more than 64"}},
		{"priority too high", poster, []actions.PlanEntry{{Key: "a", Title: "t", Priority: prio(5)}}, actions.ErrBadPriority, []string{"priority 5 is outside 0..4"}},
		{"priority negative", poster, []actions.PlanEntry{{Key: "a", Title: "t", Priority: prio(-1)}}, actions.ErrBadPriority, []string{"priority -1"}},
		{"no title", poster, []actions.PlanEntry{{Key: "a", Title: "  "}}, actions.ErrEmptyTitle, []string{`key "a"`}},
		{"two-line title", poster, []actions.PlanEntry{{Key: "a", Title: "x\ny"}}, actions.ErrBadText, []string{"one line"}},
		{"body too long", poster, []actions.PlanEntry{{Key: "a", Title: "t", Body: strings.Repeat("b", actions.MaxBodyLen+1)}}, actions.ErrTooLong, []string{"body"}},
		{"bad recipient", poster, []actions.PlanEntry{{Key: "a", Title: "t", To: "agent:nope"}}, actions.ErrBadRecipient, []string{"agent:nope"}},
		{"bad path", poster, []actions.PlanEntry{{Key: "a", Title: "t", Repo: "r", Paths: []string{"../x"}}}, pathglob.ErrBadPattern, []string{"paths", `"../x"`}},
		{"paths without a repository", poster, []actions.PlanEntry{{Key: "a", Title: "t", Paths: []string{"src"}}}, actions.ErrBadRepo, []string{`key "a"`, "no repository named"}},
		{"bad poster", "nobody", []actions.PlanEntry{entry("a")}, actions.ErrBadPoster, []string{`poster "nobody"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := actions.CheckPlan(tc.who, tc.plan)
			require.Nil(t, steps)
			refusal(t, err, tc.want, tc.says...)
		})
	}
}

func TestCheckPlan_NamesEveryCulprit(t *testing.T) {
	_, err := actions.CheckPlan(poster, []actions.PlanEntry{
		entry("a", "b"),   // #1: a cycle a → b → a
		entry("b", "a"),   // #2
		entry("a"),        // #3: duplicate
		entry("bad key"),  // #4: malformed
		entry("c", "zzz"), // #5: unknown
		{Key: "d", Title: "t", Priority: prio(9)}, // #6: priority
		entry("e", "f"),                      // #7: a second cycle e → f → g → e
		entry("f", "g"),                      // #8
		entry("g", "e"),                      // #9
		entry("h", "g"),                      // #10: behind a cycle, not on one: not named
		{Key: "i", Title: "", To: "agent:x"}, // #11: two problems in one entry
	})
	pe := refusal(t, err, actions.ErrCycle,
		`"a" → "b" → "a"`, `"e" → "f" → "g" → "e"`, `entry #3 (key "a")`, `"bad key"`, `after "zzz"`, "priority 9", "(8 problems)")
	for _, sentinel := range []error{actions.ErrDuplicateKey, actions.ErrBadKey, actions.ErrUnknownPrerequisite, actions.ErrBadPriority,
		actions.ErrEmptyTitle, actions.ErrBadRecipient} {
		require.ErrorIs(t, err, sentinel)
	}
	require.NotContains(t, err.Error(), `key "h"`)
	var cycles int
	for _, p := range pe.Problems {
		if errors.Is(p.Err, actions.ErrCycle) {
			cycles++
		}
	}
	require.Equal(t, 2, cycles, "each cycle named once")
}

func TestCheckPlan_ListsAtMostMaxPlanProblems(t *testing.T) {
	plan := make([]actions.PlanEntry, 300)
	for i := range plan {
		plan[i] = entry(fmt.Sprintf("k%d", i), "nowhere")
	}
	_, err := actions.CheckPlan(poster, plan)
	pe := refusal(t, err, actions.ErrUnknownPrerequisite, "and 200 more", "(300 problems)")
	require.Len(t, pe.Problems, actions.MaxPlanProblems)
	require.Equal(t, 200, pe.Omitted)
}

// largestPlan is the largest plan there may be: MaxPlan entries s0000,
// s0001, ..., each after the one before and as many existing ids as
// MaxAfter allows, given backwards.
func largestPlan() []actions.PlanEntry {
	plan := make([]actions.PlanEntry, actions.MaxPlan)
	for i := range plan {
		e := entry(fmt.Sprintf("s%04d", i))
		if i > 0 {
			e.After = append(e.After, fmt.Sprintf("s%04d", i-1))
		}
		for len(e.After) < actions.MaxAfter {
			e.After = append(e.After, fmt.Sprintf("a-%d", len(e.After)+1))
		}
		plan[len(plan)-1-i] = e
	}
	return plan
}

func TestCheckPlan_Largest(t *testing.T) {
	steps, err := actions.CheckPlan(poster, largestPlan())
	require.NoError(t, err)
	require.Len(t, steps, actions.MaxPlan)
	for i, s := range steps {
		require.Equal(t, fmt.Sprintf("s%04d", i), s.Key)
	}
}

func TestCheckAfter(t *testing.T) {
	got, err := actions.CheckAfter([]string{"a-2", "a-1", "a-2"})
	require.NoError(t, err)
	require.Equal(t, []string{"a-2", "a-1"}, got)
	got, err = actions.CheckAfter(nil)
	require.NoError(t, err)
	require.Nil(t, got)

	_, err = actions.CheckAfter([]string{"a-1", "build", "7"})
	require.ErrorIs(t, err, actions.ErrUnknownPrerequisite)
	require.ErrorContains(t, err, `"build", "7"`)

	many := make([]string, actions.MaxAfter+1)
	for i := range many {
		many[i] = fmt.Sprintf("a-%d", i+1)
	}
	_, err = actions.CheckAfter(many[:actions.MaxAfter])
	require.NoError(t, err)
	_, err = actions.CheckAfter(many)
	require.ErrorIs(t, err, actions.ErrTooManyPrerequisites)
}

func TestCheckPriority(t *testing.T) {
	for p := actions.MinPriority; p <= actions.MaxPriority; p++ {
		got, err := actions.CheckPriority(prio(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	got, err := actions.CheckPriority(nil)
	require.NoError(t, err)
	require.Equal(t, actions.DefaultPriority, got)
	for _, p := range []int{-1, 5, 1 << 40} {
		_, err := actions.CheckPriority(prio(p))
		require.ErrorIs(t, err, actions.ErrBadPriority)
	}
}

// FuzzCheckPlan builds small random plans: CheckPlan must never panic, an
// accepted plan's order must hold every entry once and respect every
// edge, and a cycle must be reported exactly when the key graph has one.
func FuzzCheckPlan(f *testing.F) {
	f.Add([]byte{3, 0, 1, 1, 2, 2, 0})
	f.Add([]byte{2, 0, 1, 1, 0})
	f.Add([]byte{5, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8})
	keys := []string{"a", "b", "c", "d", "e", "f", "", "a-1", "bad key"}
	afters := []string{"a", "b", "c", "d", "e", "f", "a-1", "a-22", "zzz", "7", "a-01"}
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		n := next() % 8
		plan := make([]actions.PlanEntry, n)
		for i := range plan {
			// Mostly well-formed keys, so cycles are often the only problem.
			k := next()
			key := keys[k%6]
			if k >= 200 {
				key = keys[k%len(keys)]
			}
			e := actions.PlanEntry{Key: key, Title: "t"}
			for m := next() % 4; m > 0; m-- {
				a := next()
				if a >= 230 {
					e.After = append(e.After, afters[a%len(afters)])
				} else {
					e.After = append(e.After, afters[a%6])
				}
			}
			if p := next(); p >= 250 {
				e.Priority = prio(p - 248)
			}
			plan[i] = e
		}
		steps, err := actions.CheckPlan(poster, plan)
		if err != nil {
			require.Nil(t, steps)
			require.ErrorIs(t, err, actions.ErrBadPlan)
			var pe *actions.PlanError
			require.True(t, errors.As(err, &pe))
			require.NotEmpty(t, pe.Problems)
		} else {
			require.Len(t, steps, len(plan))
			at := map[string]int{}
			seen := map[int]bool{}
			for k, s := range steps {
				require.False(t, seen[s.Index], "each entry once")
				seen[s.Index] = true
				at[s.Key] = k
			}
			for k, s := range steps {
				for _, a := range s.AfterKeys {
					require.Less(t, at[a], k, "%q comes after its prerequisite %q", s.Key, a)
				}
				for _, id := range s.AfterIDs {
					require.True(t, strings.HasPrefix(id, "a-"))
				}
			}
		}
		// The cycle verdict, against a plain depth-first search over the
		// first entry of each key.
		first := map[string]int{}
		for i, e := range plan {
			if _, ok := first[e.Key]; !ok && e.Key != "" {
				first[e.Key] = i
			}
		}
		state := make([]int, len(plan)) // 0 new, 1 on the path, 2 done
		var cyclic func(i int) bool
		cyclic = func(i int) bool {
			state[i] = 1
			for _, a := range plan[i].After {
				j, ok := first[a]
				if !ok {
					continue
				}
				if state[j] == 1 || state[j] == 0 && cyclic(j) {
					return true
				}
			}
			state[i] = 2
			return false
		}
		hasCycle := false
		for i := range plan {
			if state[i] == 0 && cyclic(i) {
				hasCycle = true
				break
			}
		}
		require.Equal(t, hasCycle, errors.Is(err, actions.ErrCycle), "plan %+v: %v", plan, err)
	})
}

func ExampleCheckPlan() {
	_, err := actions.CheckPlan("user:alice", []actions.PlanEntry{
		{Key: "migrate", Title: "Migrate the schema", After: []string{"load-test"}},
		{Key: "svc-a", Title: "Update service A", After: []string{"migrate", "Migrate"}},
		{Key: "load-test", Title: "Run the load test", After: []string{"svc-a", "a-12"}, Priority: prio(7)},
	})
	fmt.Println(err)
	// Output:
	// plan refused, nothing was posted (3 problems):
	// - entry #1 (key "migrate"): waits for itself through "migrate" → "load-test" → "svc-a" → "migrate" (each waits for the next); drop one of these after items: prerequisites form a cycle
	// - entry #2 (key "svc-a"): after "Migrate" is neither a key of this plan nor an action id (keys are case-sensitive: "migrate"?): unknown prerequisite
	// - entry #3 (key "load-test"): priority 7 is outside 0..4 (0 most urgent, default 2): priority out of range
}

// BenchmarkCheckPlan checks the largest plan (largestPlan).
func BenchmarkCheckPlan(b *testing.B) {
	plan := largestPlan()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := actions.CheckPlan(poster, plan); err != nil {
			b.Fatal(err)
		}
	}
}
