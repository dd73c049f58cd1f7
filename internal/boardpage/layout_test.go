package boardpage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
)

// The page's layout in the real browser, at a laptop's width and at a
// phone's: ages never wrap, nothing makes the page scroll sideways, the
// post form is at the top on a phone, and the forms' limits are the
// board's.
func TestLayout_LaptopAndPhone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	demoBoard(t, b)
	srv := New(b, alice, nil)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	tab := newTab(t)
	watchTab(t, tab)
	within(t, tab, 10*time.Second, chromedp.EmulateViewport(1280, 800))
	signIn(t, tab, srv.LoginURL())

	for _, size := range []struct {
		name          string
		width, height int64
	}{
		{"laptop", 1280, 800},
		{"phone", 390, 844},
	} {
		t.Run(size.name, func(t *testing.T) {
			within(t, tab, 10*time.Second, chromedp.EmulateViewport(size.width, size.height),
				chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#actions")))
			// The ages as they read after a while ("11m", "23h"): each on
			// one line.
			wrapped := eval[[]string](t, tab, `(() => {
				const out = [];
				document.querySelectorAll('#actions td time').forEach((el, i) => {
					el.textContent = ['11m', '23h', '59s', '12d'][i % 4];
					if (el.getClientRects().length !== 1) out.push(el.closest('tr').dataset.id + ' ' + el.textContent);
				});
				return out;
			})()`)
			require.Empty(t, wrapped, "ages split across lines")
			require.NotZero(t, eval[int](t, tab, `document.querySelectorAll('#actions td time').length`))
			require.LessOrEqual(t, eval[int](t, tab, `document.documentElement.scrollWidth`), int(size.width),
				"the page scrolls sideways")
			if size.name == "phone" {
				top := eval[float64](t, tab, `document.getElementById('post').getBoundingClientRect().top + scrollY`)
				actionsTop := eval[float64](t, tab, `document.getElementById('actions').getBoundingClientRect().top + scrollY`)
				t.Logf("on a phone: the post form at %.0f px, the actions at %.0f px", top, actionsTop)
				require.Less(t, top, float64(size.height)/2, "the post form is at the top, in the first screen")
				require.Less(t, top, actionsTop, "the post form comes before the actions")
			}
		})
	}
	// The forms take what the board takes, and no more.
	require.Equal(t, actions.MaxTitleLen, eval[int](t, tab, `document.querySelector('#post input[name="title"]').maxLength`))
	require.Equal(t, actions.MaxBodyLen, eval[int](t, tab, `document.querySelector('#post textarea[name="body"]').maxLength`))
	reasons := eval[[]int](t, tab, `Array.from(document.querySelectorAll('input[name="reason"]')).map(i => i.maxLength)`)
	require.NotEmpty(t, reasons)
	for _, n := range reasons {
		require.Equal(t, actions.MaxResultLen, n, "a reason's limit is the board's, as for bee cancel --reason")
	}
}
