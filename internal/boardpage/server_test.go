package boardpage

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

const tester = actions.Poster("user:tester")

// A page is a running Server on a fresh board, and a client that follows
// no redirect, keeps no cookie of its own and uses no proxy.
type page struct {
	t      testing.TB
	srv    *Server
	board  *board.Board
	path   string
	base   string // http://127.0.0.1:<port>
	client *http.Client
}

func newPage(t testing.TB, opts *Options) *page {
	t.Helper()
	path := filepath.Join(t.TempDir(), "board.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	srv := New(b, tester, opts)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &page{
		t: t, srv: srv, board: b, path: path,
		base: "http://127.0.0.1:" + strconv.Itoa(srv.Port()),
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// do sends a request with the given cookie (nil for none) and headers
// ("Host" sets the Host), and returns the answer and its body.
func (p *page) do(method, target string, cookie *http.Cookie, form url.Values, headers map[string]string) (*http.Response, string) {
	p.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(p.t.Context(), method, p.base+target, body)
	require.NoError(p.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	return resp, string(data)
}

// login uses the sign-in link and returns the session cookie.
func (p *page) login() *http.Cookie {
	p.t.Helper()
	link, err := url.Parse(p.srv.LoginURL())
	require.NoError(p.t, err)
	resp, _ := p.do("GET", link.RequestURI(), nil, nil, nil)
	require.Equal(p.t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(p.t, "/", resp.Header.Get("Location"), "the sign-in redirects to the clean URL")
	cookies := resp.Cookies()
	require.Len(p.t, cookies, 1)
	return cookies[0]
}

// csrf reads the CSRF token from the page.
func (p *page) csrf(cookie *http.Cookie) string {
	p.t.Helper()
	resp, body := p.do("GET", "/", cookie, nil, nil)
	require.Equal(p.t, http.StatusOK, resp.StatusCode)
	_, rest, ok := strings.Cut(body, `name="csrf" value="`)
	require.True(p.t, ok, "the page has a CSRF field")
	tok, _, _ := strings.Cut(rest, `"`)
	require.NotEmpty(p.t, tok)
	return tok
}

func (p *page) post(title string) actions.Record {
	p.t.Helper()
	r, err := p.board.Post(p.t.Context(), tester, actions.Draft{Title: title})
	require.NoError(p.t, err)
	return r
}

func (p *page) titles() []string {
	p.t.Helper()
	page, err := p.board.List(p.t.Context(), "")
	require.NoError(p.t, err)
	var out []string
	for _, r := range page.Records {
		out = append(out, r.Title)
	}
	return out
}

func TestServer_Login(t *testing.T) {
	p := newPage(t, nil)
	p.post("secret plans")
	cookie := p.login()
	require.Equal(t, "bee_session_"+strconv.Itoa(p.srv.Port()), cookie.Name)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	require.Equal(t, "/", cookie.Path)
	require.Zero(t, cookie.MaxAge, "a session cookie: gone with the browser")

	resp, body := p.do("GET", "/", cookie, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "secret plans")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	// The token works once: used again without the cookie, it is refused.
	link, err := url.Parse(p.srv.LoginURL())
	require.NoError(t, err)
	resp, body = p.do("GET", link.RequestURI(), nil, nil, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	require.NotContains(t, body, "secret plans")
	require.Contains(t, body, "used already")
	// The browser that signed in just goes to the page.
	resp, _ = p.do("GET", link.RequestURI(), cookie, nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Empty(t, resp.Cookies())
}

func TestServer_LoginWrongToken(t *testing.T) {
	p := newPage(t, nil)
	for _, q := range []string{"", "?token=", "?token=nope", "?token=" + strings.Repeat("A", 43)} {
		resp, _ := p.do("GET", "/login"+q, nil, nil, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, q)
		require.Empty(t, resp.Cookies(), q)
	}
	// Wrong tokens do not use up the right one.
	p.login()
}

// Without the session cookie nothing answers with board data.
func TestServer_RefusesWithoutSession(t *testing.T) {
	p := newPage(t, nil)
	p.post("secret plans")
	cookie := p.login()
	csrf := p.csrf(cookie)
	forged := &http.Cookie{Name: cookie.Name, Value: "forged"}
	other := &http.Cookie{Name: "bee_session_1", Value: cookie.Value} // another port's name

	for _, c := range []*http.Cookie{nil, forged, other} {
		for _, target := range []string{"/", "/?show=ended", "/fragment", "/events"} {
			resp, body := p.do("GET", target, c, nil, nil)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s with %v", target, c)
			require.NotContains(t, body, "secret plans")
			require.NotContains(t, body, csrf)
			require.Contains(t, body, "Not signed in")
		}
		for _, target := range []string{"/post", "/cancel", "/readdress"} {
			resp, _ := p.do("POST", target, c, url.Values{"csrf": {csrf}, "title": {"sneaky"}, "id": {"a-1"}, "to": {"x"}}, nil)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s with %v", target, c)
		}
	}
	require.Equal(t, []string{"secret plans"}, p.titles())
	rec, err := p.board.Get(t.Context(), "a-1")
	require.NoError(t, err)
	require.Equal(t, actions.Open, rec.State)
	require.Empty(t, rec.To)
}

func TestServer_RefusesForeignHostAndOrigin(t *testing.T) {
	p := newPage(t, nil)
	p.post("secret plans")
	cookie := p.login()
	csrf := p.csrf(cookie)
	port := strconv.Itoa(p.srv.Port())

	refused := []map[string]string{
		{"Host": "evil.example:" + port},
		{"Host": "127.0.0.1"},
		{"Host": "127.0.0.1:1"},
		{"Host": "[::1]:" + port},
		{"Origin": "http://evil.example"},
		{"Origin": "http://127.0.0.1:1"},
		{"Origin": "https://127.0.0.1:" + port},
		{"Origin": "null"},
		{"Origin": "null", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"},
		// The page at localhost and the page at 127.0.0.1 are two origins.
		{"Origin": "http://localhost:" + port},
		{"Origin": "http://127.0.0.1:" + port, "Host": "localhost:" + port},
	}
	for _, h := range refused {
		for _, target := range []string{"/", "/fragment", "/events", "/static/page.js"} {
			resp, body := p.do("GET", target, cookie, nil, h)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %v", target, h)
			require.NotContains(t, body, "secret plans")
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		resp, _ := p.do("POST", "/post", cookie, url.Values{"csrf": {csrf}, "title": {"from afar"}}, h)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", h)
	}
	// Two Sec-Fetch-Site headers are no browser's.
	req := httptest.NewRequestWithContext(t.Context(), "GET", "/", nil)
	req.Host = "127.0.0.1:" + port
	req.AddCookie(cookie)
	req.Header.Add("Sec-Fetch-Site", "same-origin")
	req.Header.Add("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	p.srv.handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)

	// A browser's word that a form comes from another site is enough.
	for _, site := range []string{"cross-site", "same-site"} {
		resp, _ := p.do("POST", "/post", cookie, url.Values{"csrf": {csrf}, "title": {"from afar"}}, map[string]string{"Sec-Fetch-Site": site})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, site)
	}
	require.Equal(t, []string{"secret plans"}, p.titles())

	// Our own origins, as browsers send them with every form, are fine,
	// and so is localhost as the Host. So is Sec-Fetch-Site: none, as for
	// net/http's CrossOriginProtection: a person's own navigation, which no
	// page can cause.
	for i, h := range []map[string]string{
		{"Origin": "http://127.0.0.1:" + port},
		{"Origin": "http://localhost:" + port, "Host": "localhost:" + port},
		{"Host": "localhost:" + port},
		// Chromium's own form posts under Referrer-Policy: no-referrer.
		{"Origin": "null", "Sec-Fetch-Site": "same-origin"},
		{"Sec-Fetch-Site": "none"},
	} {
		resp, _ := p.do("POST", "/post", cookie, url.Values{"csrf": {csrf}, "title": {"at home " + strconv.Itoa(i)}}, h)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%v", h)
	}
	require.Equal(t, []string{"secret plans", "at home 0", "at home 1", "at home 2", "at home 3", "at home 4"}, p.titles())
}

func TestServer_CSRF(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	for _, bad := range []url.Values{
		{"title": {"no token"}},
		{"title": {"empty token"}, "csrf": {""}},
		{"title": {"wrong token"}, "csrf": {strings.Repeat("0", len(csrf))}},
		{"title": {"short token"}, "csrf": {csrf[:10]}},
	} {
		resp, body := p.do("POST", "/post", cookie, bad, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", bad)
		require.Contains(t, body, "did not come from the board page")
	}
	// The token in the query string does not count: only the form body.
	resp, _ := p.do("POST", "/post?csrf="+csrf, cookie, url.Values{"title": {"in the query"}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, p.titles())

	resp, _ = p.do("POST", "/post", cookie, url.Values{"title": {"good"}, "csrf": {csrf}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, []string{"good"}, p.titles())
}

func TestServer_SecurityHeaders(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	for _, target := range []string{"/", "/fragment", "/login", "/static/page.js", "/nowhere"} {
		resp, _ := p.do("GET", target, cookie, nil, nil)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		require.Contains(t, csp, "frame-ancestors 'none'", target)
		require.Contains(t, csp, "script-src 'self'", target)
		require.Contains(t, csp, "default-src 'none'", target)
		require.NotContains(t, csp, "unsafe-inline", target)
		require.NotContains(t, csp, "unsafe-eval", target)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), target)
		require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), target)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), target)
		for k := range h {
			require.False(t, strings.HasPrefix(k, "Access-Control-"), "%s sends %s", target, k)
		}
	}
	resp, body := p.do("GET", "/static/page.js", nil, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript"), resp.Header.Get("Content-Type"))
	require.Contains(t, body, "EventSource")
	resp, _ = p.do("GET", "/static/", nil, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no directory listing")
	resp, _ = p.do("DELETE", "/", cookie, nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// Board text is escaped, never markup, on the page and in the fragment.
func TestServer_EscapesBoardText(t *testing.T) {
	p := newPage(t, nil)
	title := `<img src=x onerror=alert(1)> & <script>alert(2)</script>`
	r, err := p.board.Post(t.Context(), tester, actions.Draft{Title: title, Body: `<b>bold</b> "quoted"`})
	require.NoError(t, err)
	_, err = p.board.Cancel(t.Context(), tester, r.ID, `<iframe src="javascript:alert(3)">`)
	require.NoError(t, err)
	cookie := p.login()
	for _, target := range []string{"/", "/fragment", "/?show=ended"} {
		_, body := p.do("GET", target, cookie, nil, nil)
		require.Contains(t, body, "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;script&gt;alert(2)&lt;/script&gt;", target)
		require.Contains(t, body, "&lt;iframe", target)
		require.NotContains(t, body, "<img src=x", target)
		require.NotContains(t, body, "<script>alert", target)
		require.NotContains(t, body, "<iframe", target)
		require.NotContains(t, body, "<b>bold", target)
	}
}

// A form the board refuses is answered in plain words, and keeps what
// was typed.
func TestServer_FormErrors(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	flash := func(form url.Values, target string) string {
		t.Helper()
		form.Set("csrf", csrf)
		resp, _ := p.do("POST", target, cookie, form, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, body := p.do("GET", resp.Header.Get("Location"), cookie, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, rest, ok := strings.Cut(body, `<p class="flash`)
		require.True(t, ok, "a message after %s %v", target, form)
		msg, _, _ := strings.Cut(rest, "</p>")
		// Shown once only.
		_, again := p.do("GET", "/", cookie, nil, nil)
		require.NotContains(t, again, `<p class="flash`)
		return msg
	}

	msg := flash(url.Values{"title": {"  "}, "body": {"kept body"}}, "/post")
	require.Contains(t, msg, "error")
	require.Contains(t, msg, "Could not post it: an action needs a title.")

	msg = flash(url.Values{"title": {"for a ghost"}, "to": {"agent:ghost#00000000"}, "body": {"kept body"}}, "/post")
	require.Contains(t, msg, "Could not post it")
	require.Contains(t, msg, "not live")

	r := p.post("claimed one")
	who := identity.ID("agent:worker#12345678")
	require.NoError(t, p.board.Join(t.Context(), actions.Member{ID: who, PID: 1}))
	pg, err := p.board.Next(t.Context(), who, "", time.Second)
	require.NoError(t, err)
	require.Len(t, pg.Records, 1)
	msg = flash(url.Values{"id": {r.ID}, "to": {"reviewer"}, "show": {"claimed"}}, "/readdress")
	require.Contains(t, msg, "Could not re-address "+r.ID)
	require.Contains(t, msg, "held by agent:worker#12345678")

	msg = flash(url.Values{"id": {"a-99"}}, "/cancel")
	require.Contains(t, msg, "Could not cancel a-99: no action has that id")

	msg = flash(url.Values{"id": {r.ID}, "reason": {"changed my mind"}}, "/cancel")
	require.NotContains(t, msg, "error")
	require.Contains(t, msg, "Cancelled "+r.ID)
	rec, err := p.board.Get(t.Context(), r.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Cancelled, rec.State)
	require.Equal(t, "changed my mind", rec.Reason)
	require.Equal(t, string(tester), rec.EndedBy)

	msg = flash(url.Values{"id": {r.ID}}, "/cancel")
	require.Contains(t, msg, "has ended")

	// A refused post keeps what was typed.
	form := url.Values{"title": {"typed title"}, "to": {"two words"}, "body": {"typed body"}, "csrf": {csrf}}
	resp, _ := p.do("POST", "/post", cookie, form, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body := p.do("GET", "/", cookie, nil, nil)
	require.Contains(t, body, `value="typed title"`)
	require.Contains(t, body, `value="two words"`)
	require.Contains(t, body, ">typed body</textarea>")
}

// The post redirect keeps the view, and only a known one.
func TestServer_RedirectKeepsView(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	for show, want := range map[string]string{"ended": "/?show=ended", "": "/", "//evil.example": "/", "open": "/?show=open"} {
		resp, _ := p.do("POST", "/post", cookie, url.Values{"title": {"t"}, "csrf": {csrf}, "show": {show}}, nil)
		require.Equal(t, want, resp.Header.Get("Location"), show)
	}
}

func TestServer_BodyLimit(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	resp, _ := p.do("POST", "/post", cookie, url.Values{"title": {"big"}, "body": {strings.Repeat("x", MaxFormBytes)}, "csrf": {csrf}}, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Empty(t, p.titles())
}

func TestServer_PortTaken(t *testing.T) {
	p := newPage(t, nil)
	path := filepath.Join(t.TempDir(), "other.db")
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	s := New(b, tester, &Options{Port: p.srv.Port()})
	err = s.Start()
	require.ErrorContains(t, err, "listen on 127.0.0.1:"+strconv.Itoa(p.srv.Port()))
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Start(), ErrClosed)
	require.ErrorIs(t, p.srv.Start(), ErrStarted)
}

// events opens the event stream and returns a reader of its events'
// data, one per call, and a function that hangs up.
func (p *page) events(cookie *http.Cookie) (next func() string, hangUp func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+"/events", nil)
	require.NoError(p.t, err)
	req.AddCookie(cookie)
	resp, err := p.client.Do(req)
	require.NoError(p.t, err)
	require.Equal(p.t, http.StatusOK, resp.StatusCode)
	require.Equal(p.t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	next = func() string {
		p.t.Helper()
		var event, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && event != "":
				require.Equal(p.t, "change", event)
				return data
			}
		}
		return "" // the stream ended
	}
	return next, func() { cancel(); resp.Body.Close() }
}

// A change on the board reaches an open event stream; a stream's
// goroutines end when the browser hangs up.
func TestServer_EventsEndOnHangUp(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	before := goleak.IgnoreCurrent()

	next, hangUp := p.events(cookie)
	first := next()
	require.NotEmpty(t, first, "the stream opens with the current version")
	p.post("news")
	got := make(chan string, 1)
	go func() { got <- next() }()
	select {
	case v := <-got:
		require.NotEqual(t, first, v)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("no change event within 10 s of a post")
	}
	hangUp()
	p.client.Transport.(*http.Transport).CloseIdleConnections()
	require.Eventually(t, func() bool { return !p.srv.hub.watched() }, testtime.Bound(10*time.Second), 10*time.Millisecond,
		"the server saw the stream end")
	testtime.VerifyNoLeaks(t, before)
}

// Close ends open event streams at once and leaves nothing running.
func TestServer_CloseEndsEvents(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	next, hangUp := p.events(cookie)
	defer hangUp()
	require.NotEmpty(t, next())
	ended := make(chan string, 1)
	go func() { ended <- next() }()
	start := time.Now()
	require.NoError(t, p.srv.Close())
	select {
	case v := <-ended:
		require.Empty(t, v, "the stream ended without another event")
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the stream did not end within 10 s of Close")
	}
	require.Less(t, time.Since(start), testtime.Bound(shutdownTimeout+5*time.Second), "Close did not wait out the stream")
}

// The live agents are compared while a page is open: a join reaches the
// stream though Changes does not report it.
func TestServer_EventsOnAgentChange(t *testing.T) {
	p := newPage(t, &Options{MemberEvery: 50 * time.Millisecond})
	cookie := p.login()
	next, hangUp := p.events(cookie)
	first := next()
	got := make(chan string, 4)
	go func() {
		for v := next(); v != ""; v = next() {
			got <- v
		}
		close(got)
	}()
	require.NoError(t, p.board.Join(t.Context(), actions.Member{ID: "agent:late#0badcafe", PID: 1}))
	select {
	case v := <-got:
		require.NotEqual(t, first, v)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("no change event within 10 s of a join")
	}
	_, body := p.do("GET", "/fragment", cookie, nil, nil)
	require.Contains(t, body, "agent:late#0badcafe")
	hangUp()
	for range got { // the reader ends with the stream
	}
}
