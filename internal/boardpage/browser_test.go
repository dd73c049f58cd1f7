package boardpage

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/testtime"
)

// These tests run the real bee (post, list, serve) against a board file
// and drive the page in the run's one headless Chromium.

// watchTab records what must never happen on the page: a JavaScript
// dialog (markup run as script) or an uncaught exception in the page's
// script. The test fails at its end if either did.
func watchTab(t *testing.T, tab context.Context) {
	t.Helper()
	var mu sync.Mutex
	var bad []string
	require.NoError(t, chromedp.Listen(tab, func(ev any) {
		switch ev := ev.(type) {
		case *cdppage.EventJavascriptDialogOpening:
			mu.Lock()
			bad = append(bad, "a dialog opened: "+ev.Message)
			mu.Unlock()
		case *runtime.EventExceptionThrown:
			mu.Lock()
			d := ev.ExceptionDetails
			what := d.Text
			if d.Exception != nil {
				what += " " + d.Exception.Description
			}
			bad = append(bad, fmt.Sprintf("the page threw at %s:%d: %s", d.URL, d.LineNumber+1, what))
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, bad)
	})
}

// waitFlash waits for the page that a form led to to say text. It asks
// again and again, since a question asked while the page navigates fails
// (and a chromedp.Poll does not survive the navigation).
func waitFlash(t *testing.T, tab context.Context, text string) {
	t.Helper()
	expr := `(document.querySelector('p.flash') || {textContent: ''}).textContent.includes(` + strconv.Quote(text) + `)`
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(tab, testtime.Bound(2*time.Second))
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok
	}, testtime.Bound(10*time.Second), 20*time.Millisecond, "the page never said %q", text)
}

// rows returns "id state title" for each action the page shows.
func rows(t *testing.T, tab context.Context) []string {
	t.Helper()
	return eval[[]string](t, tab, `Array.from(document.querySelectorAll('#actions tr[data-id]')).map(r =>
		r.dataset.id + ' ' + r.dataset.state + ' ' + r.querySelector('td.title .text').textContent)`)
}

func boardFile(t *testing.T) string { return filepath.Join(t.TempDir(), "board.db") }

func TestBrowser_ListsWhatBeePostMade(t *testing.T) {
	path := boardFile(t)
	bee(t, path, "post", "Fix the flaky test", "TestFoo fails one run in ten.")
	bee(t, path, "post", "--to", "reviewer", "Review PR 12")
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)

	require.Equal(t, []string{"a-1 open Fix the flaky test", "a-2 open Review PR 12"}, rows(t, tab))
	require.Equal(t, "reviewer", eval[string](t, tab, `document.querySelector('tr[data-id="a-2"] td[data-label="For"]').textContent`))
	require.Equal(t, "user:tester", eval[string](t, tab, `document.querySelector('tr[data-id="a-1"] td[data-label="From"]').textContent`))

	// Signed in, the address bar holds the clean URL, and the cookie is
	// out of the script's reach.
	u, err := url.Parse(eval[string](t, tab, `location.href`))
	require.NoError(t, err)
	require.Equal(t, "/", u.Path)
	require.Empty(t, u.RawQuery)
	require.Empty(t, eval[string](t, tab, `document.cookie`))

	// The link does not work twice, not even in another browser.
	other := newTab(t)
	within(t, other, 20*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("main.denied")))
	body := eval[string](t, other, `document.body.textContent`)
	require.Contains(t, body, "used already")
	require.NotContains(t, body, "Fix the flaky test")
}

// A post made with bee after the page loaded shows without a reload.
func TestBrowser_LivePost(t *testing.T) {
	path := boardFile(t)
	bee(t, path, "post", "Already there")
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	eval[bool](t, tab, `window.__sameLoad = true`) // a reload would lose it

	for i := range 3 {
		id := "a-" + strconv.Itoa(i+2)
		// A clock in the page for when the row shows.
		eval[bool](t, tab, `window.__seenAt = 0; window.__want = `+strconv.Quote(id)+`;
			new MutationObserver(() => {
				if (!window.__seenAt && document.querySelector('tr[data-id="' + window.__want + '"]')) window.__seenAt = Date.now();
			}).observe(document.body, {childList: true, subtree: true});
			true`)
		start := time.Now()
		bee(t, path, "post", "Posted after load "+strconv.Itoa(i))
		took := time.Since(start)
		within(t, tab, 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+id+`"]`)))
		seen := eval[int64](t, tab, `window.__seenAt`)
		require.NotZero(t, seen)
		// From the start of bee post: it commits the action somewhere
		// before it exits, and the page may show it before the exit.
		latency := time.Duration(seen-start.UnixMilli()) * time.Millisecond
		t.Logf("post %d: on the page %v after bee post started (bee post itself took %v)", i, latency, took)
		require.Less(t, latency, testtime.Bound(5*time.Second), "the post showed, but late")
	}
	require.True(t, eval[bool](t, tab, `window.__sameLoad === true`), "the page was reloaded")
	require.Equal(t, "live", eval[string](t, tab, `document.getElementById('status').textContent`))
}

// A post made with the page's form reaches bee list.
func TestBrowser_FormPostReachesBeeList(t *testing.T) {
	path := boardFile(t)
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	within(t, tab, 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#post input[name="title"]`), "Posted from the page"),
		chromedp.SendKeys(chromedp.CSS(`#post input[name="to"]`), "reviewer"),
		chromedp.SendKeys(chromedp.CSS(`#post textarea[name="body"]`), "Line one.\nLine two."),
		chromedp.Click(chromedp.CSS(`#post button[type="submit"]`)),
	)
	waitFlash(t, tab, "Posted a-1 for reviewer")

	recs := beeList(t, path)
	require.Len(t, recs, 1)
	require.Equal(t, "Posted from the page", recs[0].Title)
	require.Equal(t, "reviewer", recs[0].To)
	require.Equal(t, "user:tester", recs[0].From)
	require.Equal(t, "Line one.\nLine two.", recs[0].Body, "the browser's CRLF is stored as LF")
	require.Contains(t, bee(t, path, "list"), "Posted from the page")
}

// Cancel and re-address from the page reach the board.
func TestBrowser_CancelAndReaddress(t *testing.T) {
	path := boardFile(t)
	bee(t, path, "post", "Not needed after all")
	bee(t, path, "post", "For someone else")
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)

	within(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`details[data-op="cancel-a-1"] summary`)),
		chromedp.SendKeys(chromedp.CSS(`details[data-op="cancel-a-1"] input[name="reason"]`), "done by hand"),
		chromedp.Click(chromedp.CSS(`details[data-op="cancel-a-1"] button`)),
	)
	waitFlash(t, tab, "Cancelled a-1")
	within(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`details[data-op="readdress-a-2"] summary`)),
		chromedp.SendKeys(chromedp.CSS(`details[data-op="readdress-a-2"] input[name="to"]`), "reviewer"),
		chromedp.Click(chromedp.CSS(`details[data-op="readdress-a-2"] button`)),
	)
	waitFlash(t, tab, "Sent a-2 to reviewer")

	recs := beeList(t, path)
	require.Len(t, recs, 2)
	require.Equal(t, actions.Cancelled, recs[0].State)
	require.Equal(t, "done by hand", recs[0].Reason)
	require.Equal(t, "user:tester", recs[0].EndedBy)
	require.Equal(t, actions.Open, recs[1].State)
	require.Equal(t, "reviewer", recs[1].To)
	// The page shows both as they now are.
	require.Equal(t, []string{"a-2 open For someone else", "a-1 cancelled Not needed after all"}, rows(t, tab))

	// The filters: open shows a-2 only, ended a-1 only.
	origin := eval[string](t, tab, `location.origin`)
	within(t, tab, 10*time.Second, chromedp.Navigate(origin+"/?show=open"), chromedp.WaitVisible(chromedp.CSS("#actions")))
	require.Equal(t, []string{"a-2 open For someone else"}, rows(t, tab))
	within(t, tab, 10*time.Second, chromedp.Navigate(origin+"/?show=ended"), chromedp.WaitVisible(chromedp.CSS("#actions")))
	require.Equal(t, []string{"a-1 cancelled Not needed after all"}, rows(t, tab))
	require.Equal(t, "done by hand", eval[string](t, tab, `document.querySelector('tr[data-id="a-1"] td.outcome').textContent`))
}

// A change that arrives while a person is typing in a row's form keeps the
// form open and what was typed.
func TestBrowser_LiveKeepsOpenForm(t *testing.T) {
	path := boardFile(t)
	bee(t, path, "post", "Keep me")
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	within(t, tab, 10*time.Second,
		chromedp.Click(chromedp.CSS(`details[data-op="cancel-a-1"] summary`)),
		chromedp.SendKeys(chromedp.CSS(`details[data-op="cancel-a-1"] input[name="reason"]`), "half a rea"),
	)
	bee(t, path, "post", "Arrives meanwhile")
	within(t, tab, 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-2"]`)))
	require.True(t, eval[bool](t, tab, `document.querySelector('details[data-op="cancel-a-1"]').open`))
	require.Equal(t, "half a rea", eval[string](t, tab, `document.querySelector('details[data-op="cancel-a-1"] input[name="reason"]').value`))
	require.Equal(t, "reason", eval[string](t, tab, `document.activeElement.name`), "the field keeps the focus")
	within(t, tab, 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(`details[data-op="cancel-a-1"] input[name="reason"]`), "son"),
		chromedp.Click(chromedp.CSS(`details[data-op="cancel-a-1"] button`)),
	)
	waitFlash(t, tab, "Cancelled a-1")
	recs := beeList(t, path)
	require.Equal(t, "half a reason", recs[0].Reason)
}

// A title holding markup is shown as text, on load and live, and runs
// nothing.
func TestBrowser_MarkupShownAsText(t *testing.T) {
	path := boardFile(t)
	titles := []string{`<img src=x onerror=alert(1)>`, `<script>alert(2)</script>`}
	body := `<img src=y onerror="window.pwned=1"><b>bold</b>`
	bee(t, path, "post", titles[0], body)
	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	bee(t, path, "post", titles[1], body) // arrives live, through the fragment
	within(t, tab, 5*time.Second, chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-2"]`)))

	require.Equal(t, []string{"a-1 open " + titles[0], "a-2 open " + titles[1]}, rows(t, tab))
	within(t, tab, 10*time.Second, chromedp.Click(chromedp.CSS(`details[data-op="body-a-1"] summary`)))
	require.Equal(t, body, eval[string](t, tab, `document.querySelector('details[data-op="body-a-1"] pre').textContent`))
	require.Equal(t, body, eval[string](t, tab, `document.querySelector('details[data-op="body-a-2"] pre').textContent`))
	require.Zero(t, eval[int](t, tab, `document.querySelectorAll('#actions img, #actions script, #actions b').length`))
	require.True(t, eval[bool](t, tab, `window.pwned === undefined`))
}
