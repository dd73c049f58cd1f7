package boardpage

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// render draws the live fragment of records and members for show.
func render(t *testing.T, show string, records []actions.Record, members []actions.MemberInfo) string {
	t.Helper()
	v := &pageView{Show: cleanShow(show), CSRF: "tok"}
	v.fill(time.Now(), records, members)
	var buf bytes.Buffer
	require.NoError(t, templates.ExecuteTemplate(&buf, "live", v))
	return buf.String()
}

func TestView_States(t *testing.T) {
	now := time.Now()
	at := func(ago time.Duration) *time.Time { x := now.Add(-ago); return &x }
	long := strings.Repeat("a long result ", 30)
	records := []actions.Record{
		{ID: "a-1", State: actions.Open, Title: "open one", From: "user:ann", PostedAt: now.Add(-90 * time.Second)},
		{ID: "a-2", State: actions.Claimed, Title: "held by the dead", To: "builder", Holder: "agent:builder#12345678", HolderGone: true, PostedAt: now},
		{ID: "a-3", State: actions.Done, Title: "done one", Holder: "agent:builder#12345678", EndedBy: "agent:builder#12345678", Result: long, PostedAt: now, EndedAt: at(time.Hour)},
		{ID: "a-4", State: actions.Failed, Title: "failed one", EndedBy: "agent:builder#12345678", Reason: "no disk", PostedAt: now, EndedAt: at(time.Minute)},
		{ID: "a-5", State: actions.Cancelled, Title: "cancelled one", EndedBy: "user:ann", PostedAt: now, EndedAt: at(time.Second)},
	}
	waiter := now.Add(-3 * time.Minute)
	members := []actions.MemberInfo{
		{ID: "agent:builder#12345678", Agent: "builder", PID: 10, ClaudePID: 11, SessionID: "s-1", Client: "codex", Holding: []string{"a-2"}, JoinedAt: now},
		{ID: "agent:builder#9abcdef0", Agent: "builder", PID: 12, Holding: []string{}, JoinedAt: now, WaiterSince: &waiter},
	}
	html := render(t, "", records, members)

	require.Contains(t, html, `<time data-since="`+itoa(records[0].PostedAt.UnixMilli()))
	require.Contains(t, html, ">1m</time>", "the age of a-1")
	require.Regexp(t, `agent:builder#12345678 <span class="gone"`, html, "a gone holder is marked")
	// Only open actions can be re-addressed; only unended ones cancelled.
	require.Contains(t, html, `data-op="readdress-a-1"`)
	require.NotContains(t, html, `data-op="readdress-a-2"`)
	require.Contains(t, html, `data-op="cancel-a-2"`)
	require.NotContains(t, html, `data-op="cancel-a-3"`)
	// Ended: newest first, with outcome and who ended it; a long result folds.
	require.Less(t, strings.Index(html, `data-id="a-5"`), strings.Index(html, `data-id="a-4"`))
	require.Less(t, strings.Index(html, `data-id="a-4"`), strings.Index(html, `data-id="a-3"`))
	require.Contains(t, html, `data-op="outcome-a-3"`)
	require.Contains(t, html, "no disk")
	// Tabs count every state.
	require.Regexp(t, `Open <span class="count">1</span>`, html)
	require.Regexp(t, `Claimed <span class="count">1</span>`, html)
	require.Regexp(t, `Ended <span class="count">3</span>`, html)
	// Agents: what each holds, its waiter, its Claude pid.
	require.Contains(t, html, `href="#row-a-2"`)
	require.Contains(t, html, `<span class="armed">armed</span>`)
	require.Contains(t, html, ">3m</time> ago")
	require.Contains(t, html, "not armed")
	require.Contains(t, html, `<dd class="client">Codex CLI</dd>`)
	require.Contains(t, html, `<dd class="client">–</dd>`, "a bridge that found no client")
	require.Contains(t, html, `<option value="builder"><option value="agent:builder#12345678"><option value="agent:builder#9abcdef0">`)

	open := render(t, "open", records, members)
	require.Contains(t, open, `data-id="a-1"`)
	require.NotContains(t, open, `data-id="a-2"`)
	require.NotContains(t, open, `data-id="a-3"`)
	ended := render(t, "ended", records, members)
	require.NotContains(t, ended, `data-id="a-1"`)
	require.Contains(t, ended, `data-id="a-3"`)
	odd := render(t, `"><script>`, records, members)
	require.Contains(t, odd, `data-id="a-1"`, "an unknown view is the whole board")
	require.NotContains(t, odd, "<script>")
}

// Only the newest ended actions show; the page says how many it leaves out.
func TestView_EndedMore(t *testing.T) {
	now := time.Now()
	var records []actions.Record
	for i := range endedOnAll + 5 {
		end := now.Add(time.Duration(i) * time.Second)
		records = append(records, actions.Record{ID: "a-" + itoa(int64(i+1)), State: actions.Done, PostedAt: now, EndedAt: &end})
	}
	html := render(t, "", records, nil)
	require.Equal(t, endedOnAll, strings.Count(html, `data-state="done"`))
	require.Contains(t, html, `data-id="a-25"`)
	require.NotContains(t, html, `data-id="a-5"`)
	require.Contains(t, html, "5 older ended actions are not shown")
	require.Contains(t, html, "No live agents")
	require.Equal(t, endedOnAll+5, strings.Count(render(t, "ended", records, nil), `data-state="done"`))
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59 * time.Second: "59s", time.Minute: "1m", 59 * time.Minute: "59m",
		time.Hour: "1h", 47 * time.Hour: "47h", 48 * time.Hour: "2d",
	} {
		require.Equal(t, want, span(d), d)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// requirePageInert fails t when html holds a character a person would not
// see for what it is: a control (other than the page's own line breaks
// and tabs), a C1 control, DEL, or an invisible format character (bidi
// overrides and isolates, zero-width ones).
func requirePageInert(t *testing.T, html string) {
	t.Helper()
	for _, r := range html {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r):
			t.Fatalf("the page shows %U raw", r)
		}
	}
}

// Board text on the page follows bee's one rule (package termtext): a bidi
// override, a zero-width space and a control character show as visible
// escapes, never raw, in every field that shows board text.
func TestView_HostileTextInert(t *testing.T) {
	now := time.Now()
	evil := "invoice\u202etxt.exe pay\u200bpal \x1b[2J bell\a c1\u0085 iso\u2066"
	records := []actions.Record{
		{ID: "a-1", State: actions.Open, Title: evil, Body: evil + "\nsecond line", From: "user:ann", To: "worker", PostedAt: now},
		{ID: "a-2", State: actions.Claimed, Title: "held", Holder: "agent:w#12345678", PostedAt: now},
		{ID: "a-3", State: actions.Done, Title: "done", Result: evil, EndedBy: "agent:w#12345678", PostedAt: now, EndedAt: &now},
		{ID: "a-4", State: actions.Failed, Title: "failed", Reason: evil + "\n" + strings.Repeat("long ", 50), EndedBy: "agent:w#12345678", PostedAt: now, EndedAt: &now},
	}
	members := []actions.MemberInfo{{ID: "agent:w#12345678", Agent: "w", PID: 1, SessionID: evil, Holding: []string{"a-2"}, JoinedAt: now}}
	html := render(t, "", records, members)
	requirePageInert(t, html)
	require.Contains(t, html, `invoice\u202etxt.exe pay\u200bpal \x1b[2J bell\x07 c1\u0085 iso\u2066`)
	require.Contains(t, html, "\nsecond line", "a body keeps its lines")

	var buf bytes.Buffer
	v := &pageView{Show: showAll, CSRF: "tok", Flash: &flash{Text: "Posted a-1 for anyone: " + evil}}
	v.fill(now, records, members)
	require.NoError(t, templates.ExecuteTemplate(&buf, "page", v))
	requirePageInert(t, buf.String())
	require.Contains(t, buf.String(), `Posted a-1 for anyone: invoice\u202etxt.exe`)
}
