package boardpage

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// People in the loop, in the real browser, on the real board, with bee
// serve in its own process: an agent's question to the person shows on
// the open page without a reload, at the top, counted in the tab's title,
// the agent marked as waiting on them; an answer typed while the page
// changes is kept; the answer form ends the question done with the answer,
// and the agent's idle waiter, asleep meanwhile, is woken with it. A blank
// answer is refused; a decline fails a question with the reason. None of
// it reloads the page.
func TestBrowser_ForYouAnswer(t *testing.T) {
	path := boardFile(t)
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	lead := identity.ID("agent:lead#0a1b2c3d")
	require.NoError(t, b.Join(ctx, actions.Member{ID: lead, PID: os.Getpid()})) // this process: it stays live
	// Not for the asker: its waiter hears of nothing but the answer.
	bee(t, path, "post", "--to", "reviewer", "Already there")

	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	eval[bool](t, tab, `window.__sameLoad = true`) // a reload would lose it
	require.Equal(t, "bee board", eval[string](t, tab, `document.title`))
	require.True(t, eval[bool](t, tab, `document.getElementById('foryou').hidden`), "nothing waits: no For you section")

	// The agent asks; the page shows the question within a second or so.
	eval[bool](t, tab, `window.__seenAt = 0;
		new MutationObserver(() => {
			if (!window.__seenAt && document.getElementById('q-a-2')) window.__seenAt = Date.now();
		}).observe(document.body, {childList: true, subtree: true});
		true`)
	start := time.Now()
	q, err := b.Post(ctx, actions.Agent(lead), actions.Draft{To: "user:tester", Title: "Run the migration tonight?", Body: "It locks the users table for about 2 minutes."})
	require.NoError(t, err)
	require.Equal(t, "a-2", q.ID)
	within(t, tab, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#q-a-2`)))
	latency := time.Duration(eval[int64](t, tab, `window.__seenAt`)-start.UnixMilli()) * time.Millisecond
	t.Logf("the question was on the page %v after it was posted", latency)
	require.Less(t, latency, testtime.Bound(5*time.Second), "the question showed, but late")

	require.Equal(t, "(1) bee board", eval[string](t, tab, `document.title`))
	require.Equal(t, "a-2 · agent:lead#0a1b2c3d asks you", eval[string](t, tab,
		`document.querySelector('#q-a-2 .asked').textContent.replace(/ · \S+ ago$/, '')`))
	require.Equal(t, "Run the migration tonight?", eval[string](t, tab, `document.querySelector('#q-a-2 .qtitle').textContent`))
	require.Equal(t, "It locks the users table for about 2 minutes.", eval[string](t, tab, `document.querySelector('#q-a-2 .qbody').textContent`))
	require.Equal(t, "For you 1", eval[string](t, tab, `document.querySelector('.tabs a').textContent`))
	agent := `#agents article[data-identity="agent:lead#0a1b2c3d"]`
	require.Equal(t, "on you: a-2", eval[string](t, tab, `document.querySelector('`+agent+` .waiting-on').textContent.trim()`))
	// The For you section is above the actions; in one column (a phone),
	// above the post form too.
	above := `document.getElementById('foryou').getBoundingClientRect().top < document.getElementById(%q).getBoundingClientRect().top`
	require.True(t, eval[bool](t, tab, fmt.Sprintf(above, "actions")))
	within(t, tab, 10*time.Second, chromedp.EmulateViewport(390, 844))
	require.True(t, eval[bool](t, tab, fmt.Sprintf(above, "post")), "on a phone, the questions come first")
	within(t, tab, 10*time.Second, chromedp.EmulateViewport(1400, 900))

	// The agent's idle waiter sleeps until the answer.
	type heard struct {
		n   actions.Notice
		ok  bool
		err error
	}
	woken := make(chan heard, 1)
	go func() {
		n, ok, err := b.Notice(ctx, lead, nil, testtime.Bound(60*time.Second))
		woken <- heard{n, ok, err}
	}()

	// Half an answer, then a change: the page swaps the section, keeping
	// what was typed.
	within(t, tab, 10*time.Second, chromedp.SendKeys(chromedp.CSS(`#q-a-2 textarea[name="text"]`), "Yes, after 22:00"))
	_, err = b.Post(ctx, actions.Agent(lead), actions.Draft{To: actions.People, Title: "Which design?"})
	require.NoError(t, err)
	within(t, tab, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#q-a-3`)))
	require.Equal(t, "(2) bee board", eval[string](t, tab, `document.title`))
	require.Equal(t, "Yes, after 22:00", eval[string](t, tab, `document.querySelector('#q-a-2 textarea[name="text"]').value`))
	require.Equal(t, "agent:lead#0a1b2c3d asks people", eval[string](t, tab,
		`document.querySelector('#q-a-3 .asked').textContent.replace(/^a-3 · /, '').replace(/ · \S+ ago$/, '')`))
	require.True(t, eval[bool](t, tab, `window.__sameLoad === true`), "the page was reloaded")
	select {
	case h := <-woken:
		t.Fatalf("the asker was woken before the answer: %+v", h)
	default:
	}

	within(t, tab, 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#q-a-2 textarea[name="text"]`), ".\nBack up first."),
		chromedp.Click(chromedp.CSS(`#q-a-2 button[type="submit"]`)),
	)
	waitFlash(t, tab, "Answered a-2 for agent:lead#0a1b2c3d: Run the migration tonight?")
	const answer = "Yes, after 22:00.\nBack up first."
	select {
	case h := <-woken:
		require.NoError(t, h.err)
		require.True(t, h.ok, "the asker's waiter ran out without news")
		require.Equal(t, actions.NoticeOutcome, h.n.Kind)
		require.Equal(t, "a-2", h.n.Record.ID)
		require.Equal(t, actions.Done, h.n.Record.State)
		require.Equal(t, answer, h.n.Record.Result)
	case <-time.After(testtime.Bound(20 * time.Second)):
		t.Fatal("the asker was not woken by the answer")
	}
	recs := beeList(t, path)
	require.Len(t, recs, 3)
	require.Equal(t, actions.Done, recs[1].State)
	require.Equal(t, answer, recs[1].Result)
	require.Equal(t, "user:tester", recs[1].EndedBy)

	// Answered: one question left, the agent waiting on that one only.
	require.Equal(t, "(1) bee board", eval[string](t, tab, `document.title`))
	require.Zero(t, eval[int](t, tab, `document.querySelectorAll('#q-a-2').length`))
	require.Equal(t, "on you: a-3", eval[string](t, tab, `document.querySelector('`+agent+` .waiting-on').textContent.trim()`))

	// A blank answer is refused in words, and changes nothing.
	within(t, tab, 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#q-a-3 textarea[name="text"]`), "   "),
		chromedp.Click(chromedp.CSS(`#q-a-3 button[type="submit"]`)),
	)
	waitFlash(t, tab, "Could not answer a-3: the answer is blank")
	require.Equal(t, actions.Open, beeList(t, path)[2].State)

	// Decline it, from the page.
	within(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`details[data-op="decline-a-3"] summary`)),
		chromedp.SendKeys(chromedp.CSS(`details[data-op="decline-a-3"] input[name="reason"]`), "ask the design review"),
		chromedp.Click(chromedp.CSS(`details[data-op="decline-a-3"] button`)),
	)
	waitFlash(t, tab, "Declined a-3")
	recs = beeList(t, path)
	require.Equal(t, actions.Failed, recs[2].State)
	require.Equal(t, "ask the design review", recs[2].Reason)
	require.Equal(t, "bee board", eval[string](t, tab, `document.title`))
	require.True(t, eval[bool](t, tab, `document.getElementById('foryou').hidden`))
	require.Equal(t, "For you 0", eval[string](t, tab, `document.querySelector('.tabs a').textContent`))
	require.Zero(t, eval[int](t, tab, `document.querySelectorAll('`+agent+` .waiting-on').length`))
	require.True(t, eval[bool](t, tab, `window.__sameLoad === true`), "answering reloaded the page")
	require.Equal(t, "live", eval[string](t, tab, `document.getElementById('status').textContent`))
}
