package boardpage

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// asker is the agent that asks the page's person things in these tests.
const asker = identity.ID("agent:lead#0a1b2c3d")

// ask posts, as asker (joined first), a question to to.
func (p *page) ask(to, title string) actions.Record {
	p.t.Helper()
	require.NoError(p.t, p.board.Join(p.t.Context(), actions.Member{ID: asker, PID: 1}))
	r, err := p.board.Post(p.t.Context(), actions.Agent(asker), actions.Draft{To: to, Title: title})
	require.NoError(p.t, err)
	require.Equal(p.t, actions.Open, r.State)
	return r
}

// state returns the action id's state on the board.
func (p *page) record(id string) actions.Record {
	p.t.Helper()
	r, err := p.board.Get(p.t.Context(), id)
	require.NoError(p.t, err)
	return r
}

// flashAfter posts form (with the session's CSRF token) to target and
// returns the message the page then shows once.
func (p *page) flashAfter(cookie *http.Cookie, csrf, target string, form url.Values) string {
	p.t.Helper()
	form.Set("csrf", csrf)
	resp, _ := p.do("POST", target, cookie, form, nil)
	require.Equal(p.t, http.StatusSeeOther, resp.StatusCode, "%s %v", target, form)
	resp, body := p.do("GET", resp.Header.Get("Location"), cookie, nil, nil)
	require.Equal(p.t, http.StatusOK, resp.StatusCode)
	_, rest, ok := strings.Cut(body, `<p class="flash`)
	require.True(p.t, ok, "a message after %s %v", target, form)
	msg, _, _ := strings.Cut(rest, "</p>")
	return msg
}

// The page shows the person the questions for them (by name or to
// people), oldest first, with their count in the tabs and the title, and
// the agent that asked as waiting on them; not a question for someone else
// nor an agent's action.
func TestForYou_Shown(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	_, body := p.do("GET", "/", cookie, nil, nil)
	require.Contains(t, body, "<title id=\"doctitle\" data-live>bee board</title>")
	require.Contains(t, body, `id="foryou" class="foryou" data-live hidden>`, "no questions: the all view shows none")

	mine := p.ask(string(tester), "approve the migration?")
	anyone := p.ask(actions.People, "which design?")
	other := p.ask("user:ann", "ann's question")
	work := p.ask("", "agent work")

	_, body = p.do("GET", "/", cookie, nil, nil)
	require.Contains(t, body, "<title id=\"doctitle\" data-live>(2) bee board</title>")
	require.Contains(t, body, `For you <span class="count">2</span>`)
	section := between(t, body, `<section id="foryou"`, `</section>`)
	require.Contains(t, section, `id="q-`+mine.ID+`"`)
	require.Contains(t, section, `id="q-`+anyone.ID+`"`)
	require.Less(t, strings.Index(section, `id="q-`+mine.ID+`"`), strings.Index(section, `id="q-`+anyone.ID+`"`), "oldest first")
	require.NotContains(t, section, `id="q-`+other.ID+`"`)
	require.NotContains(t, section, `id="q-`+work.ID+`"`)
	require.Contains(t, section, string(asker)+`</span> asks you`)
	require.Contains(t, section, string(asker)+`</span> asks people`)
	agents := between(t, body, `<section class="card" id="agents"`, `</section>`)
	require.Contains(t, agents, `<article class="agent waiting" data-identity="`+string(asker)+`">`)
	require.Contains(t, agents, `on you: <a class="mono" href="#q-`+mine.ID+`">`+mine.ID+`</a> <a class="mono" href="#q-`+anyone.ID+`">`)

	// The "For you" view shows them and not the tables; the open view
	// not them; the live fragment carries the title and the section.
	_, body = p.do("GET", "/?show=foryou", cookie, nil, nil)
	require.Contains(t, body, `aria-current="page">For you`)
	require.Contains(t, body, `id="q-`+mine.ID+`"`)
	require.NotContains(t, body, `<table class="actions">`)
	_, body = p.do("GET", "/?show=open", cookie, nil, nil)
	require.NotContains(t, body, `id="q-`+mine.ID+`"`)
	_, body = p.do("GET", "/fragment", cookie, nil, nil)
	require.Contains(t, body, "(2) bee board")
	require.Contains(t, body, `id="q-`+anyone.ID+`"`)
}

// between returns what s holds from the first start to the end after it.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, start)
	require.True(t, ok, "no %s", start)
	in, _, ok := strings.Cut(rest, end)
	require.True(t, ok, "no %s after %s", end, start)
	return in
}

// An answer from the page ends the question done, with the answer, by the
// page's person, and wakes the agent that asked; a decline fails it with
// the reason. The page refuses, in plain words and changing nothing, what
// bee answer and bee decline refuse: a blank answer or reason, a question
// for someone else, an action for agents, one that has ended, no such id.
func TestForYou_AnswerAndDecline(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	q := p.ask(string(tester), "approve the migration?")
	anyone := p.ask(actions.People, "which design?")
	other := p.ask("user:ann", "ann's question")
	work := p.ask("", "agent work")

	for _, c := range []struct {
		target string
		form   url.Values
		want   []string
	}{
		{"/answer", url.Values{"id": {q.ID}, "text": {" \r\n "}}, []string{"Could not answer " + q.ID + ": the answer is blank"}},
		{"/decline", url.Values{"id": {q.ID}, "reason": {"  "}}, []string{"Could not decline " + q.ID + ": say why"}},
		{"/answer", url.Values{"id": {other.ID}, "text": {"yes"}}, []string{"Could not answer " + other.ID, "is for user:ann, not user:tester"}},
		{"/decline", url.Values{"id": {other.ID}, "reason": {"no"}}, []string{"Could not decline " + other.ID, "is for user:ann"}},
		{"/answer", url.Values{"id": {work.ID}, "text": {"yes"}}, []string{"Could not answer " + work.ID, "not for people"}},
		{"/answer", url.Values{"id": {"a-99"}, "text": {"yes"}}, []string{"Could not answer a-99: no action has that id"}},
		{"/answer", url.Values{"text": {"yes"}}, []string{"Could not answer"}},
	} {
		msg := p.flashAfter(cookie, csrf, c.target, c.form)
		require.Contains(t, msg, "error", "%s %v", c.target, c.form)
		for _, w := range c.want {
			require.Contains(t, msg, w, "%s %v", c.target, c.form)
		}
	}
	for _, r := range []actions.Record{q, anyone, other, work} {
		require.Equal(t, actions.Open, p.record(r.ID).State, "%s after the refusals", r.ID)
	}

	msg := p.flashAfter(cookie, csrf, "/answer", url.Values{"id": {q.ID}, "text": {"yes,\r\ntonight"}, "show": {"foryou"}})
	require.NotContains(t, msg, "error")
	require.Contains(t, msg, "Answered "+q.ID+" for "+string(asker)+": approve the migration?")
	got := p.record(q.ID)
	require.Equal(t, actions.Done, got.State)
	require.Equal(t, "yes,\ntonight", got.Result, "the browser's CRLF is stored as LF")
	require.Equal(t, string(tester), got.EndedBy)
	n, ok, err := p.board.Notice(t.Context(), asker, nil, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "the asker heard nothing")
	require.Equal(t, actions.NoticeOutcome, n.Kind)
	require.Equal(t, q.ID, n.Record.ID)
	require.Equal(t, "yes,\ntonight", n.Record.Result)

	msg = p.flashAfter(cookie, csrf, "/answer", url.Values{"id": {q.ID}, "text": {"no, wait"}})
	require.Contains(t, msg, "error")
	require.Contains(t, msg, "has ended")
	require.Equal(t, "yes,\ntonight", p.record(q.ID).Result)

	msg = p.flashAfter(cookie, csrf, "/decline", url.Values{"id": {anyone.ID}, "reason": {"ask ops"}})
	require.NotContains(t, msg, "error")
	require.Contains(t, msg, "Declined "+anyone.ID)
	got = p.record(anyone.ID)
	require.Equal(t, actions.Failed, got.State)
	require.Equal(t, "ask ops", got.Reason)
	require.Equal(t, string(tester), got.EndedBy)
	msg = p.flashAfter(cookie, csrf, "/decline", url.Values{"id": {anyone.ID}, "reason": {"again"}})
	require.Contains(t, msg, "has ended")

	_, body := p.do("GET", "/", cookie, nil, nil)
	require.Contains(t, body, "<title id=\"doctitle\" data-live>bee board</title>", "nothing waits any more")
	require.NotContains(t, body, "waiting-on")
}

// The answer and decline forms stand behind the page's guard like its
// other forms: no session cookie, no CSRF token, another origin or host,
// or a browser's word that the form came from another site, and the
// question stays open. A GET changes nothing either.
func TestForYou_Guarded(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	csrf := p.csrf(cookie)
	q := p.ask(string(tester), "approve the migration?")
	port := strconv.Itoa(p.srv.Port())
	answer := url.Values{"csrf": {csrf}, "id": {q.ID}, "text": {"yes"}, "reason": {"no"}}
	noToken := url.Values{"id": {q.ID}, "text": {"yes"}, "reason": {"no"}}
	wrongToken := url.Values{"csrf": {strings.Repeat("0", len(csrf))}, "id": {q.ID}, "text": {"yes"}, "reason": {"no"}}
	forged := &http.Cookie{Name: cookie.Name, Value: "forged"}

	for _, target := range []string{"/answer", "/decline"} {
		for _, c := range []struct {
			cookie  *http.Cookie
			form    url.Values
			headers map[string]string
			code    int
		}{
			{nil, answer, nil, http.StatusUnauthorized},
			{forged, answer, nil, http.StatusUnauthorized},
			{cookie, noToken, nil, http.StatusForbidden},
			{cookie, wrongToken, nil, http.StatusForbidden},
			{cookie, answer, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
			{cookie, answer, map[string]string{"Origin": "null"}, http.StatusForbidden},
			{cookie, answer, map[string]string{"Origin": "http://localhost:" + port}, http.StatusForbidden},
			{cookie, answer, map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
			{cookie, answer, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			{cookie, answer, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		} {
			resp, body := p.do("POST", target, c.cookie, c.form, c.headers)
			require.Equal(t, c.code, resp.StatusCode, "%s %v %v", target, c.headers, c.cookie)
			require.NotContains(t, body, "approve the migration?")
		}
		resp, _ := p.do("GET", target+"?"+answer.Encode(), cookie, nil, nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, target)
		// The token in the query string does not count.
		resp, _ = p.do("POST", target+"?csrf="+csrf, cookie, noToken, nil)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, target)
	}
	require.Equal(t, actions.Open, p.record(q.ID).State, "a refused form changed the question")

	// From the page itself (Chromium's own form, under no-referrer) it
	// goes through.
	resp, _ := p.do("POST", "/answer", cookie, answer, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, actions.Done, p.record(q.ID).State)
}

// An agent whose asking identity has gone (a /clear) hears the answer as
// its next identity: that identity shows as waiting on the person.
func TestForYou_WaitingAfterClear(t *testing.T) {
	now := time.Now()
	records := []actions.Record{
		{ID: "a-1", State: actions.Open, Title: "first", From: "agent:lead#00000001", To: "user:ann", PostedAt: now.Add(-time.Minute)},
		{ID: "a-2", State: actions.Open, Title: "second", From: "agent:lead#00000002", To: actions.People, PostedAt: now},
		{ID: "a-3", State: actions.Open, Title: "from a person", From: "user:bob", To: actions.People, PostedAt: now},
		{ID: "a-4", State: actions.Done, Title: "answered", From: "agent:lead#00000002", To: "user:ann", PostedAt: now},
		{ID: "a-5", State: actions.Open, Title: "for bob", From: "agent:other#00000003", To: "user:bob", PostedAt: now},
	}
	members := []actions.MemberInfo{
		{ID: "agent:lead#00000002", Agent: "lead", PID: 1, JoinedAt: now},
		{ID: "agent:other#00000003", Agent: "other", PID: 2, JoinedAt: now},
	}
	v := &pageView{Show: showAll, CSRF: "tok", Person: "user:ann"}
	v.fill(now, records, members)
	v.fillForYou(now, records, "user:ann")
	var ids []string
	for _, q := range v.ForYou.Questions {
		ids = append(ids, q.ID)
	}
	require.Equal(t, []string{"a-1", "a-2", "a-3"}, ids)
	require.Equal(t, []string{"a-1", "a-2"}, v.WaitingOnYou("agent:lead#00000002"))
	require.Empty(t, v.WaitingOnYou("agent:other#00000003"))
	require.Equal(t, "For you", v.Tabs[0].Label)
	require.Equal(t, 3, v.Tabs[0].Count)
	require.Equal(t, "(3) bee board", v.DocTitle())

	var buf bytes.Buffer
	require.NoError(t, templates.ExecuteTemplate(&buf, "live", v))
	html := buf.String()
	requirePageInert(t, html)
	require.Contains(t, html, `<article class="agent waiting" data-identity="agent:lead#00000002">`)
	require.Contains(t, html, `<article class="agent" data-identity="agent:other#00000003">`)
	require.Contains(t, html, `user:bob</span> asks people`)
}
