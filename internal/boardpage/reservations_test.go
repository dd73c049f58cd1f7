package boardpage

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// renderWith draws the live fragment of records, members and their
// reservations.
func renderWith(t *testing.T, records []actions.Record, members []actions.MemberInfo, rs []actions.Reservation) string {
	t.Helper()
	v := &pageView{Show: showAll, CSRF: "tok"}
	now := time.Now()
	v.fill(now, records, members)
	v.fillReservations(now, rs, records)
	var buf bytes.Buffer
	require.NoError(t, templates.ExecuteTemplate(&buf, "live", v))
	return buf.String()
}

// article returns the article of html whose attribute attr is value.
func article(t *testing.T, html, attr, value string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<article [^>]*` + regexp.QuoteMeta(attr+`="`+value+`"`) + `.*?</article>`).FindString(html)
	require.NotEmpty(t, m, "no article with %s=%q", attr, value)
	return m
}

// Each live agent shows what it reserves and what that holds back; a
// person's reservations show after the agents; a held-back action says by
// whom, and an action's paths show with its title.
func TestView_Reservations(t *testing.T) {
	now := time.Now()
	alice, carol := "agent:alice#0491068b", "agent:carol#00000001"
	records := []actions.Record{
		{ID: "a-1", State: actions.Open, Title: "rework login", Repo: "github.com/x/r", Paths: []string{"src/auth/login.go"}, PostedAt: now,
			HeldBackBy: []actions.HeldBack{{Reservation: "r-1", Holder: alice, Pattern: "src/auth/**"}}},
		{ID: "a-2", State: actions.Open, Title: "docs", Repo: "github.com/x/r", Paths: []string{"docs/**"}, PostedAt: now,
			HeldBackBy: []actions.HeldBack{{Reservation: "r-2", Holder: "user:bob", Pattern: "docs"}, {Reservation: "r-1", Holder: alice, Pattern: "docs/auth.md"}}},
		{ID: "a-3", State: actions.Open, Title: "free", Repo: "github.com/x/r", Paths: []string{"cmd/**"}, PostedAt: now},
		{ID: "a-7", State: actions.Claimed, Title: "alice's", Holder: alice, PostedAt: now},
	}
	members := []actions.MemberInfo{
		{ID: "agent:alice#0491068b", Agent: "alice", PID: 10, Holding: []string{"a-7"}, JoinedAt: now},
		{ID: "agent:carol#00000001", Agent: "carol", PID: 11, Holding: []string{}, JoinedAt: now},
	}
	rs := []actions.Reservation{
		{ID: "r-1", Repo: "github.com/x/r", Holder: alice, Patterns: []string{"src/auth/**", "docs/auth.md"}, Exclusive: true,
			Reason: "moving sessions", Action: "a-7", Since: now.Add(-3 * time.Minute)},
		{ID: "r-2", Repo: "github.com/x/r", Holder: "user:bob", Patterns: []string{"docs"}, Reason: "release notes", Since: now},
	}
	html := renderWith(t, records, members, rs)

	a := article(t, html, "data-identity", alice)
	require.Contains(t, a, `data-reservation="r-1"`)
	require.Contains(t, a, `<span class="mono">src/auth/** docs/auth.md</span> <span class="kind exclusive">exclusive</span>`)
	require.Contains(t, a, `for <a class="mono" href="#row-a-7">a-7</a>`)
	require.Contains(t, a, `<q>moving sessions</q>`)
	require.Contains(t, a, ">3m</time>")
	require.Regexp(t, `holds back</dt><dd class="holds-back"><a class="mono" href="#row-a-1">a-1</a> <a class="mono" href="#row-a-2">a-2</a>`, a)

	c := article(t, html, "data-identity", carol)
	require.Contains(t, c, `reserves</dt><dd><span class="none">nothing</span>`)
	require.NotContains(t, c, "holds back")

	require.Contains(t, html, "Reserved by people")
	b := article(t, html, "data-holder", "user:bob")
	require.Contains(t, b, `<span class="kind">shared</span>`)
	require.Contains(t, b, `<q>release notes</q>`)
	require.Contains(t, b, `href="#row-a-2"`)

	row := regexp.MustCompile(`(?s)<tr id="row-a-1".*?</tr>`).FindString(html)
	require.Contains(t, row, `held back by agent:alice#0491068b (src/auth/**)`)
	require.Contains(t, row, `paths: <span class="mono">src/auth/login.go</span>`)
	row = regexp.MustCompile(`(?s)<tr id="row-a-2".*?</tr>`).FindString(html)
	require.Contains(t, row, `held back by user:bob (docs) and 1 more`)
	row = regexp.MustCompile(`(?s)<tr id="row-a-3".*?</tr>`).FindString(html)
	require.NotContains(t, row, "held back")
	require.Contains(t, row, `<span class="none">–</span>`)

	// Nobody reserves anything: no people's section.
	html = renderWith(t, records[3:], members, nil)
	require.NotContains(t, html, "Reserved by people")
}

// Reservation text follows bee's one rule for board text, as every other
// field does.
func TestView_ReservationsInert(t *testing.T) {
	now := time.Now()
	evil := "invoice\u202etxt.exe \x1b[2J"
	records := []actions.Record{{ID: "a-1", State: actions.Open, Title: "t", Repo: evil, Paths: []string{evil}, PostedAt: now,
		HeldBackBy: []actions.HeldBack{{Reservation: evil, Holder: "user:" + evil, Pattern: evil}}}}
	rs := []actions.Reservation{{ID: evil, Repo: evil, Holder: "user:" + evil, Patterns: []string{evil}, Reason: evil, Action: evil, Since: now}}
	html := renderWith(t, records, nil, rs)
	requirePageInert(t, html)
	require.Contains(t, html, `invoice\u202etxt.exe \x1b[2J`)
}
