package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/actionstest"
	"github.com/tractat-us/bee/repo"
)

// gitRepo makes a git repository whose origin is url, in a fresh
// directory, and returns its root (symlink-free).
func gitRepo(t *testing.T, url string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "auth"), 0o755))
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", url}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	return dir
}

// connectIn is connect for a session working in dir.
func connectIn(t *testing.T, src actions.Source, dir string) (*Session, *mcp.ClientSession) {
	t.Helper()
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, Dir: dir})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	return s, connectPending(t, Ready(s), nil, nil)
}

// reserveRecorder is a fake board's reservations that records what the
// tools ask for.
type reserveRecorder struct {
	mu       sync.Mutex
	reserved []actions.ReserveRequest
	who      []actions.Poster
	released []string // repo, then the patterns, joined
}

func (r *reserveRecorder) source() *actionstest.Source {
	src := &actionstest.Source{}
	src.ReserveFunc = func(_ context.Context, who actions.Poster, req actions.ReserveRequest) (actions.Reservation, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reserved = append(r.reserved, req)
		r.who = append(r.who, who)
		return actions.Reservation{ID: "r-1", Repo: req.Repo, Holder: string(who), Patterns: req.Patterns, Exclusive: !req.Shared,
			Reason: req.Reason, Action: req.Action, Since: time.Now()}, nil
	}
	src.ReleasePathsFunc = func(_ context.Context, who actions.Poster, repoName string, patterns []string) ([]actions.Reservation, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.released = append(r.released, repoName+" "+strings.Join(patterns, ","))
		if len(patterns) == 0 {
			return nil, nil
		}
		return []actions.Reservation{{ID: "r-1", Repo: repoName, Holder: string(who), Patterns: patterns, Exclusive: true}}, nil
	}
	return src
}

func TestReserveTools_AskTheBoardInTheSessionsRepository(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	rec := &reserveRecorder{}
	s, cs := connectIn(t, rec.source(), filepath.Join(dir, "src")) // a subfolder: the repository is the same
	me := actions.Agent(s.Identity())
	const name = "github.com/tractat-us/bee"

	out := structured[reserveOut](t, call(t, cs, ToolReserve, map[string]any{"paths": []string{"src/auth/**", "docs/auth.md"}, "reason": "moving sessions"}))
	require.Equal(t, "r-1", out.Reservation.ID)
	require.True(t, out.Reservation.Exclusive)
	require.Contains(t, out.Next, ToolReleasePaths)
	out = structured[reserveOut](t, call(t, cs, ToolReserve, map[string]any{"paths": []string{"go.mod"}, "reason": "bump", "exclusive": false, "action": "a-3"}))
	require.False(t, out.Reservation.Exclusive)
	require.Contains(t, out.Next, "shared")
	require.Contains(t, out.Next, "a-3 ends")
	require.Equal(t, []actions.ReserveRequest{
		{Repo: name, Patterns: []string{"src/auth/**", "docs/auth.md"}, Reason: "moving sessions"},
		{Repo: name, Patterns: []string{"go.mod"}, Shared: true, Reason: "bump", Action: "a-3"},
	}, rec.reserved)
	require.Equal(t, []actions.Poster{me, me}, rec.who)

	rel := structured[releasePathsOut](t, call(t, cs, ToolReleasePaths, map[string]any{"paths": []string{"go.mod"}}))
	require.Len(t, rel.Released, 1)
	require.Contains(t, rel.Next, "may change these paths now")
	rel = structured[releasePathsOut](t, call(t, cs, ToolReleasePaths, nil))
	require.NotNil(t, rel.Released)
	require.Empty(t, rel.Released)
	require.Contains(t, rel.Next, "nothing was released")
	require.Equal(t, []string{name + " go.mod", " "}, rec.released, "paths name the session's repository; none releases every repository's")

	w := structured[whoamiOut](t, call(t, cs, ToolWhoami, nil))
	require.Equal(t, name, w.Repo)
}

func TestReserveTools_Refusals(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	src := &actionstest.Source{}
	since := time.Now().Add(-3 * time.Minute)
	src.ReserveFunc = func(_ context.Context, _ actions.Poster, req actions.ReserveRequest) (actions.Reservation, error) {
		return actions.Reservation{}, &actions.ReservedError{Repo: req.Repo, At: time.Now(), Conflicts: []actions.Reservation{{
			ID: "r-9", Repo: req.Repo, Holder: "agent:alice#0491068b", Patterns: []string{"src/auth/**"}, Exclusive: true,
			Reason: "moving sessions to the store", Action: "a-12", Since: since,
		}}}
	}
	_, cs := connectIn(t, src, dir)
	for _, tc := range []struct {
		name, tool, args string
		want             []string
	}{
		{"held by another", ToolReserve, `{"paths":["src/auth/login.go"],"reason":"fix"}`,
			[]string{"agent:alice#0491068b", "moving sessions to the store", "a-12", "Take other work", `post to the holder (bee_post_action with to "agent:alice#0491068b")`}},
		{"no reason", ToolReserve, `{"paths":["src"],"reason":"  "}`, []string{"argument reason", "agents whose edits are refused read it"}},
		{"reason missing", ToolReserve, `{"paths":["src"]}`, []string{"argument reason", "is required"}},
		{"no paths", ToolReserve, `{"paths":[],"reason":"r"}`, []string{"argument paths", "at least one"}},
		{"escaping the root", ToolReserve, `{"paths":["src","../x"],"reason":"r"}`, []string{"argument paths", `"../x"`}},
		{"absolute", ToolReserve, `{"paths":["/etc/passwd"],"reason":"r"}`, []string{"argument paths", `"/etc/passwd"`}},
		{"not strings", ToolReserve, `{"paths":"src","reason":"r"}`, []string{"argument paths", "array"}},
		{"exclusive not a bool", ToolReserve, `{"paths":["src"],"reason":"r","exclusive":"no"}`, []string{"argument exclusive", "true or false"}},
		{"too many", ToolReserve, `{"paths":[` + strings.Repeat(`"a",`, 64) + `"b"],"reason":"r"}`, []string{"argument paths", "64"}},
		{"release a bad pattern", ToolReleasePaths, `{"paths":["a//b"]}`, []string{"argument paths", `"a//b"`}},
		{"post a bad pattern", ToolPost, `{"title":"t","body":"b","paths":["**x"]}`, []string{"argument paths", `"**x"`}},
		{"list takes nothing", ToolListReservations, `{"repo":"x"}`, []string{"argument repo", "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, json.RawMessage(tc.args))
			for _, w := range tc.want {
				require.Contains(t, said(t, res), w)
			}
		})
	}
}

// A session whose repository bee cannot tell cannot reserve, and says so;
// releasing everything needs no repository.
func TestReserveTools_NoRepository(t *testing.T) {
	t.Parallel()
	rec := &reserveRecorder{}
	_, cs := connectIn(t, rec.source(), filepath.Join(t.TempDir(), "gone"))
	for _, args := range []struct{ tool, args string }{
		{ToolReserve, `{"paths":["src"],"reason":"r"}`},
		{ToolListReservations, `{}`},
		{ToolReleasePaths, `{"paths":["src"]}`},
		{ToolPost, `{"title":"t","body":"b","paths":["src"]}`},
	} {
		got := said(t, call(t, cs, args.tool, json.RawMessage(args.args)))
		require.Contains(t, got, "cannot tell which repository", args.tool)
		require.Contains(t, got, "Tell the user", args.tool)
	}
	structured[releasePathsOut](t, call(t, cs, ToolReleasePaths, nil))
	require.Empty(t, rec.reserved)
}

func TestListReservations_MarksYours(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "https://github.com/tractat-us/bee")
	src := &actionstest.Source{}
	var asked []string
	var me string
	src.ReservationsFunc = func(_ context.Context, repoName string) ([]actions.Reservation, error) {
		asked = append(asked, repoName)
		return []actions.Reservation{
			{ID: "r-1", Repo: repoName, Holder: "agent:alice#0491068b", Patterns: []string{"src/auth/**"}, Exclusive: true},
			{ID: "r-2", Repo: repoName, Holder: me, Patterns: []string{"docs"}, Exclusive: true},
		}, nil
	}
	s, cs := connectIn(t, src, dir)
	me = string(s.Identity())
	out := structured[listReservationsOut](t, call(t, cs, ToolListReservations, nil))
	require.Equal(t, "github.com/tractat-us/bee", out.Repo)
	require.Len(t, out.Reservations, 2)
	require.False(t, out.Reservations[0].Yours)
	require.True(t, out.Reservations[1].Yours)
	require.Contains(t, out.Next, "not yours to edit")
	require.Equal(t, []string{"github.com/tractat-us/bee"}, asked)

	src.ReservationsFunc = func(context.Context, string) ([]actions.Reservation, error) { return []actions.Reservation{}, nil }
	out = structured[listReservationsOut](t, call(t, cs, ToolListReservations, nil))
	require.NotNil(t, out.Reservations)
	require.Contains(t, out.Next, "Nobody holds paths")
}

// A post's paths are in the session's repository, and a post held back
// says by whom.
func TestPost_Paths(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	src := &actionstest.Source{}
	var drafts []actions.Draft
	src.PostFunc = func(_ context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
		drafts = append(drafts, d)
		r := actions.Record{ID: "a-1", From: string(by), Title: d.Title, Repo: d.Repo, Paths: d.Paths, State: actions.Open, PostedAt: time.Now()}
		if len(d.Paths) > 0 {
			r.HeldBackBy = []actions.HeldBack{{Reservation: "r-4", Holder: "agent:alice#0491068b", Pattern: "src/auth/**"}}
		}
		return r, nil
	}
	_, cs := connectIn(t, src, dir)
	out := structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "t", "body": "b", "paths": []string{"src/auth/**"}}))
	require.Contains(t, out.Next, "held back: agent:alice#0491068b holds src/auth/** (r-4)")
	out = structured[actionOut](t, call(t, cs, ToolPost, map[string]any{"title": "u", "body": "b"}))
	require.NotContains(t, out.Next, "held back")
	require.Equal(t, []actions.Draft{
		{Title: "t", Body: "b", Repo: "github.com/tractat-us/bee", Paths: []string{"src/auth/**"}},
		{Title: "u", Body: "b"},
	}, drafts)
}

// The guard's question is answered for the session's current identity,
// in the repository each file lands in; its own reservations never hold
// it, and a retire makes the new identity the one that asks.
func TestSession_CheckPaths(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	other := gitRepo(t, "git@github.com:tractat-us/other.git")
	src := &actionstest.Source{}
	type q struct {
		who   actions.Poster
		repo  string
		paths string
	}
	var mu sync.Mutex
	var asked []q
	src.ConflictsFunc = func(_ context.Context, who actions.Poster, repoName string, paths []string) ([]actions.Reservation, error) {
		mu.Lock()
		asked = append(asked, q{who, repoName, strings.Join(paths, ",")})
		mu.Unlock()
		if repoName != "github.com/tractat-us/other" {
			return []actions.Reservation{}, nil
		}
		return []actions.Reservation{{ID: "r-1", Repo: repoName, Holder: "agent:alice#0491068b", Patterns: []string{"src/**"}, Exclusive: true}}, nil
	}
	s, err := NewSession(t.Context(), Config{Agent: "tester", Source: src, Dir: dir})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	r, err := s.Repo()
	require.NoError(t, err)
	require.Equal(t, repo.Repo{Name: "github.com/tractat-us/bee", Root: dir}, r)

	first := s.Identity()
	held, err := s.CheckPaths(t.Context(), []string{filepath.Join(dir, "src/auth/login.go"), filepath.Join(other, "src/x.go")})
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, filepath.Join(other, "src/x.go"), held[0].Path)
	require.Equal(t, "src/**", held[0].Pattern)

	_, err = s.Retire(t.Context(), RetireRequest{})
	require.NoError(t, err)
	_, err = Ready(s).CheckPaths(t.Context(), []string{filepath.Join(dir, "README.md")})
	require.NoError(t, err)
	require.Equal(t, []q{
		{actions.Agent(first), "github.com/tractat-us/bee", "src/auth/login.go"},
		{actions.Agent(first), "github.com/tractat-us/other", "src/x.go"},
		{actions.Agent(s.Identity()), "github.com/tractat-us/bee", "README.md"},
	}, asked)

	require.NoError(t, s.Depart(t.Context()))
	_, err = s.CheckPaths(t.Context(), []string{filepath.Join(dir, "README.md")})
	require.ErrorIs(t, err, actions.ErrDeparted, "a departed session cannot decide: the hook lets the edit through, saying so")
}

// Two sessions on a real board file: what one reserves, the other's
// reserve, edits (the guard's question) and posts meet, naming the
// holder; released or cleared (/clear), it is free again.
func TestReserveTools_TwoSessionsOnABoard(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	b := openBoard(t)
	a, ca := connectIn(t, b, dir)
	bs, cb := connectIn(t, b, dir)
	login := filepath.Join(dir, "src", "auth", "login.go")

	r := structured[reserveOut](t, call(t, ca, ToolReserve, map[string]any{"paths": []string{"src/auth/**"}, "reason": "moving sessions to the store"})).Reservation
	require.Equal(t, string(a.Identity()), r.Holder)
	require.Equal(t, "github.com/tractat-us/bee", r.Repo)

	got := said(t, call(t, cb, ToolReserve, map[string]any{"paths": []string{"src/auth/login.go"}, "reason": "fix a typo"}))
	require.Contains(t, got, string(a.Identity()))
	require.Contains(t, got, "moving sessions to the store")
	require.Contains(t, got, "post to the holder")

	held, err := bs.CheckPaths(t.Context(), []string{login, filepath.Join(dir, "README.md")})
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, login, held[0].Path)
	require.Equal(t, string(a.Identity()), held[0].Reservation.Holder)
	require.Equal(t, "src/auth/**", held[0].Pattern)
	held, err = a.CheckPaths(t.Context(), []string{login})
	require.NoError(t, err)
	require.Empty(t, held, "the holder's own edits go through")

	post := structured[actionOut](t, call(t, cb, ToolPost, map[string]any{"title": "rework login", "body": "b", "paths": []string{"src/auth/login.go"}}))
	require.Equal(t, []actions.HeldBack{{Reservation: r.ID, Holder: string(a.Identity()), Pattern: "src/auth/**"}}, post.Action.HeldBackBy)
	require.Contains(t, post.Next, "held back: "+string(a.Identity()))

	list := structured[listReservationsOut](t, call(t, cb, ToolListReservations, nil))
	require.Len(t, list.Reservations, 1)
	require.False(t, list.Reservations[0].Yours)
	require.True(t, structured[listReservationsOut](t, call(t, ca, ToolListReservations, nil)).Reservations[0].Yours)

	// /clear: the old identity's reservations end with it.
	_, err = a.Retire(t.Context(), RetireRequest{})
	require.NoError(t, err)
	held, err = bs.CheckPaths(t.Context(), []string{login})
	require.NoError(t, err)
	require.Empty(t, held)
	require.Empty(t, structured[listReservationsOut](t, call(t, cb, ToolListReservations, nil)).Reservations)

	// Reserved again, then released by the tool.
	structured[reserveOut](t, call(t, ca, ToolReserve, map[string]any{"paths": []string{"src/auth/**", "docs"}, "reason": "again"}))
	rel := structured[releasePathsOut](t, call(t, ca, ToolReleasePaths, map[string]any{"paths": []string{"src/auth/**"}}))
	require.Len(t, rel.Released, 1)
	require.Equal(t, []string{"src/auth/**"}, rel.Released[0].Patterns)
	held, err = bs.CheckPaths(t.Context(), []string{login, filepath.Join(dir, "docs", "x.md")})
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "docs", held[0].Pattern)
	rel = structured[releasePathsOut](t, call(t, ca, ToolReleasePaths, nil))
	require.Len(t, rel.Released, 1)
	held, err = bs.CheckPaths(t.Context(), []string{filepath.Join(dir, "docs", "x.md")})
	require.NoError(t, err)
	require.Empty(t, held)
}

// A plan's steps with paths name the session's repository, as a post's
// do; steps without paths name none.
func TestPostPlan_Paths(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, "git@github.com:tractat-us/bee.git")
	src := &actionstest.Source{}
	var got []actions.PlanEntry
	src.PlanFunc = func(_ context.Context, by actions.Poster, plan []actions.PlanEntry) (actions.PostedPlan, error) {
		got = plan
		out := actions.PostedPlan{IDs: map[string]string{}}
		for i, e := range plan {
			id := fmt.Sprintf("a-%d", i+1)
			out.Records = append(out.Records, actions.Record{ID: id, From: string(by), Title: e.Title, Repo: e.Repo, State: actions.Open})
			out.IDs[e.Key] = id
		}
		return out, nil
	}
	_, cs := connectIn(t, src, filepath.Join(dir, "src"))
	structured[planOut](t, call(t, cs, ToolPlan, map[string]any{"actions": []map[string]any{
		{"key": "edit", "title": "edit", "body": "b", "paths": []string{"src/auth/**"}},
		{"key": "test", "title": "test", "body": "b", "after": []string{"edit"}},
	}}))
	require.Len(t, got, 2)
	require.Equal(t, "github.com/tractat-us/bee", got[0].Repo)
	require.Equal(t, []string{"src/auth/**"}, got[0].Paths)
	require.Empty(t, got[1].Repo)
	require.Nil(t, got[1].Paths)
}
