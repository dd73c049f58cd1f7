package boardpage

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// screenshotEnv names the file TestScreenshot writes the page to, for
// the README: BEE_SCREENSHOT=$PWD/docs/board-page.png go test -run
// TestScreenshot ./internal/boardpage/ (BEE_SCREENSHOT_NARROW likewise, for a narrow
// window).
const (
	screenshotEnv       = "BEE_SCREENSHOT"
	screenshotNarrowEnv = "BEE_SCREENSHOT_NARROW"
)

// A demo board's people and agents.
const (
	alice    = actions.Poster("user:alice")
	reviewer = identity.ID("agent:reviewer#1a2b3c4d")
	builder  = identity.ID("agent:builder#5e6f7a8b")
	docs     = identity.ID("agent:docs#9c0d1e2f")
)

// demoBoard fills b with a few actions in every state and three live
// agents (their processes are this test's, so they stay live).
func demoBoard(t *testing.T, b *board.Board) {
	t.Helper()
	ctx := t.Context()
	for i, m := range []actions.Member{
		{ID: reviewer, PID: os.Getpid(), ClaudePID: 48211, SessionID: "5f0c2d1e-8a7b-4c3d-9e2f-1a0b9c8d7e6f"},
		{ID: builder, PID: os.Getpid(), ClaudePID: 48377, SessionID: "c41d8a2b-6e5f-4a3b-8c7d-2e1f0a9b8c7d"},
		{ID: docs, PID: os.Getpid(), ClaudePID: 49102, SessionID: "0e9d8c7b-1a2b-4c3d-8e4f-5a6b7c8d9e0f"},
	} {
		require.NoError(t, b.Join(ctx, m), "join %d", i)
	}
	post := func(to identity.ID, title, body string) actions.Record {
		r, err := b.Post(ctx, alice, actions.Draft{To: string(to), Title: title, Body: body})
		require.NoError(t, err)
		return r
	}
	claim := func(who identity.ID) actions.Record {
		p, err := b.Next(ctx, who, "", time.Second)
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		return p.Records[0]
	}

	post(identity.ID(builder.Agent()), "Bump gopsutil to v4.26.10", "")
	_, err := b.Finish(ctx, builder, claim(builder).ID, "Done: go.mod and go.sum updated, go test -race ./... green.")
	require.NoError(t, err)

	post(identity.ID(builder.Agent()), "Deploy the staging build", "Tag v0.4.0-rc1 and roll it out to staging.")
	_, err = b.Fail(ctx, builder, claim(builder).ID, "The staging registry refuses the image: its storage quota is used up. Someone with admin rights must raise it.")
	require.NoError(t, err)

	r := post(identity.ID(docs.Agent()), "Rewrite the README's introduction", "")
	_, err = b.Cancel(ctx, alice, r.ID, "superseded by the new quick start")
	require.NoError(t, err)

	post(identity.ID(reviewer.Agent()), "Review PR 12: a retry budget for uploads", "Check the backoff bounds and that a zero budget means no retry.")
	claim(reviewer)
	post("", "Find why TestUpload fails one run in ten", "It fails on CI only, under -race.")
	claim(builder)
	post(identity.ID(docs.Agent()), "Write the release notes for 0.4", "")
	post("", "Triage issue 31: bee watch misses a change", "")
	require.NoError(t, b.SetWaiter(ctx, docs, true))
}

// shownAs is a board that names itself as where, so that the screenshot
// shows a path people recognize rather than a test's temporary one.
type shownAs struct {
	*board.Board
	where string
}

func (s shownAs) Location() string { return s.where }

// TestScreenshot draws the page of a board with actions in every state in
// the real browser and checks that it is an image of the whole page; with
// $BEE_SCREENSHOT set it writes it there (docs/board-page.png).
func TestScreenshot(t *testing.T) {
	srv := demoServer(t, demoBoard)

	tab := newTab(t)
	for _, shot := range []struct {
		env           string
		width, height int64
	}{
		{screenshotEnv, 1360, 820},
		{screenshotNarrowEnv, 420, 900},
	} {
		within(t, tab, 10*time.Second, chromedp.EmulateViewport(shot.width, shot.height))
		if shot.env == screenshotEnv {
			signIn(t, tab, srv.LoginURL())
		}
		ctx, cancel := testContext(tab, 20*time.Second)
		img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err)
		cfg, err := png.DecodeConfig(bytes.NewReader(img))
		require.NoError(t, err, "the screenshot is a PNG")
		require.Equal(t, int(shot.width), cfg.Width)
		require.GreaterOrEqual(t, cfg.Height, int(shot.height))
		if out := os.Getenv(shot.env); out != "" {
			require.NoError(t, os.WriteFile(out, img, 0o644))
			t.Logf("wrote %s (%dx%d)", out, cfg.Width, cfg.Height)
		}
	}
}

// screenshotForYouEnv names the file TestScreenshotForYou writes the page
// to: BEE_SCREENSHOT_FORYOU=$PWD/docs/for-you.png.
const screenshotForYouEnv = "BEE_SCREENSHOT_FORYOU"

// demoServer starts a Server, as alice, on a fresh board that fill fills,
// shown as ~/.bee/board.db; the test ends both.
func demoServer(t *testing.T, fill func(*testing.T, *board.Board)) *Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	fill(t, b)
	srv := New(shownAs{b, "~/.bee/board.db"}, alice, nil)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

// fullScreenshot takes a screenshot of the whole page in tab, requires
// that it is a PNG width pixels wide, and writes it to the file $env
// names, if any.
func fullScreenshot(t *testing.T, tab context.Context, width int, env string) {
	t.Helper()
	ctx, cancel := testContext(tab, 20*time.Second)
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	cancel()
	require.NoError(t, err)
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	require.NoError(t, err, "the screenshot is a PNG")
	require.Equal(t, width, cfg.Width)
	if out := os.Getenv(env); out != "" {
		require.NoError(t, os.WriteFile(out, img, 0o644))
		t.Logf("wrote %s (%dx%d)", out, cfg.Width, cfg.Height)
	}
}

// TestScreenshotForYou draws the demo board with two questions for its
// person, one asked of them and one of people, and checks that the page
// shows them first; with $BEE_SCREENSHOT_FORYOU set it writes the
// screenshot there (docs/for-you.png).
func TestScreenshotForYou(t *testing.T) {
	srv := demoServer(t, func(t *testing.T, b *board.Board) {
		demoBoard(t, b)
		ctx := t.Context()
		_, err := b.Post(ctx, actions.Agent(builder), actions.Draft{To: string(alice), Title: "Raise the staging registry's storage quota?",
			Body: "The staging deploy failed: the registry's quota (50 GiB) is used up. Raise it to 80 GiB, or should I prune images older than 30 days instead?"})
		require.NoError(t, err)
		_, err = b.Post(ctx, actions.Agent(docs), actions.Draft{To: actions.People, Title: "Which name for the 0.4 release: \"Drone\" or \"Comb\"?"})
		require.NoError(t, err)
	})
	tab := newTab(t)
	within(t, tab, 10*time.Second, chromedp.EmulateViewport(1360, 820))
	signIn(t, tab, srv.LoginURL())
	require.Equal(t, "(2) bee board", eval[string](t, tab, `document.title`))
	require.Equal(t, 2, eval[int](t, tab, `document.querySelectorAll('#foryou .question').length`))
	require.True(t, eval[bool](t, tab, `document.getElementById('foryou').getBoundingClientRect().top < document.getElementById('actions').getBoundingClientRect().top`))
	within(t, tab, 10*time.Second, chromedp.Click(chromedp.CSS(`#foryou .question textarea`)),
		chromedp.SendKeys(chromedp.CSS(`#foryou .question textarea`), "Prune the old images first; raise it only if that frees less than 10 GiB."))
	fullScreenshot(t, tab, 1360, screenshotForYouEnv)
}
