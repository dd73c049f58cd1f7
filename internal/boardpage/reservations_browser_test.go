package boardpage

import (
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// The page shows each agent's reservations and what they hold back, a
// person's after the agents, and on a held-back action by whom; it
// follows reservations made and released in other processes without a
// reload (a reservation changes no action).
func TestBrowser_Reservations(t *testing.T) {
	path := boardFile(t)
	const repoName = "github.com/tractat-us/bee"
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	alice := identity.ID("agent:alice#0491068b")
	require.NoError(t, b.Join(ctx, actions.Member{ID: alice, PID: os.Getpid()})) // this process: she stays live
	_, err = b.Reserve(ctx, actions.Agent(alice), actions.ReserveRequest{Repo: repoName, Patterns: []string{"src/auth/**"}, Reason: "moving sessions to the store"})
	require.NoError(t, err)
	bee(t, path, "post", "--repo", repoName, "--paths", "src/auth/login.go", "Fix the login redirect")
	bee(t, path, "post", "Free work")

	link := serve(t, path)
	tab := newTab(t)
	watchTab(t, tab)
	signIn(t, tab, link)
	eval[bool](t, tab, `window.__sameLoad = true`)

	agent := `#agents article[data-identity="agent:alice#0491068b"]`
	require.Equal(t, "src/auth/** exclusive \u201cmoving sessions to the store\u201d",
		eval[string](t, tab, `(() => { const r = document.querySelector('`+agent+` .reservation[data-reservation="r-1"]');
			return r.querySelector('.mono').textContent + ' ' + r.querySelector('.kind').textContent + ' \u201c' + r.querySelector('q').textContent + '\u201d'; })()`))
	require.Equal(t, []string{"a-1"}, eval[[]string](t, tab, `Array.from(document.querySelectorAll('`+agent+` .holds-back a')).map(a => a.textContent)`))
	heldBy := `document.querySelector('tr[data-id="a-1"] td[data-label="Holder"]').textContent`
	require.Equal(t, "held back by agent:alice#0491068b (src/auth/**)", eval[string](t, tab, heldBy))
	require.Equal(t, "paths: src/auth/login.go", eval[string](t, tab, `document.querySelector('tr[data-id="a-1"] .paths').textContent`))
	require.Equal(t, "–", eval[string](t, tab, `document.querySelector('tr[data-id="a-2"] td[data-label="Holder"]').textContent`))
	require.Zero(t, eval[int](t, tab, `document.querySelectorAll('#agents article[data-holder]').length`))

	// A person reserves, in another process: the page shows it, live.
	bee(t, path, "reserve", "--repo", repoName, "--from", "ann", "--shared", "docs", "--reason", "release notes")
	person := `#agents article[data-holder="user:ann"]`
	within(t, tab, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(person)))
	require.Equal(t, "docs shared", eval[string](t, tab, `(() => { const r = document.querySelector('`+person+` .reservation');
		return r.querySelector('.mono').textContent + ' ' + r.querySelector('.kind').textContent; })()`))

	// Alice goes: her reservation with her, and a-1 is free; the person
	// releases: her card goes. Without a reload.
	require.NoError(t, b.Depart(ctx, alice))
	within(t, tab, 10*time.Second, chromedp.Poll[chromedp.Void](heldBy+` === '–'`, chromedp.WithPollingInterval(20*time.Millisecond)))
	bee(t, path, "release", "--repo", repoName, "--from", "ann")
	within(t, tab, 10*time.Second, chromedp.Poll[chromedp.Void](`document.querySelectorAll('`+person+`').length === 0`, chromedp.WithPollingInterval(20*time.Millisecond)))
	require.True(t, eval[bool](t, tab, `window.__sameLoad === true`), "the page was reloaded")
}
