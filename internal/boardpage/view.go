package boardpage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/ancestry"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/termtext"
)

const (
	// endedOnAll is how many ended actions the "all" view shows, newest
	// first; the "ended" view shows up to endedOnEnded.
	endedOnAll   = 20
	endedOnEnded = 200
)

// The views a person can pick: the value of ?show=.
const (
	showAll     = ""
	showOpen    = "open"
	showClaimed = "claimed"
	showEnded   = "ended"
)

// cleanShow maps ?show= to a known view: anything else is showAll, so a
// crafted value never reaches a redirect or a link.
func cleanShow(v string) string {
	switch v {
	case showOpen, showClaimed, showEnded, showForYou:
		return v
	}
	return showAll
}

// pageView is what the templates render.
type pageView struct {
	Person   string
	Location string
	Show     string
	Tabs     []tab
	// Active holds the open and claimed actions the view shows, oldest
	// first; Ended the ended ones, newest first, and EndedMore how many
	// ended ones it leaves out.
	Active     []actionView
	Ended      []actionView
	EndedMore  int
	Agents     []agentView
	People     []holderView // holders of reservations that are not live agents (people)
	ForYou     forYou       // the questions for the page's person
	Recipients []string     // the datalist of the "to" fields: agent names, then identities
	CSRF       string
	Version    uint64
	Flash      *flash
	Err        string // the board could not be read: say so instead of data
	// Plan is the plan view (plan.go), shown instead of the tables; nil
	// for the board's own views.
	Plan *planView
}

// The forms' limits are the board's own (package actions), the same for
// every way onto the board: the page, bee and the tools. A browser counts
// a maxlength in UTF-16 units and the board counts bytes, so text beyond
// ASCII can still pass the form and be refused, in words, by the board.

// MaxTitle is the most characters a title holds.
func (v *pageView) MaxTitle() int { return actions.MaxTitleLen }

// MaxBody is the most bytes a body holds.
func (v *pageView) MaxBody() int { return actions.MaxBodyLen }

// MaxReason is the most bytes a reason (or a result) holds.
func (v *pageView) MaxReason() int { return actions.MaxResultLen }

// ShowActive reports whether the view has the open/claimed table.
func (v *pageView) ShowActive() bool { return v.Show != showEnded && v.Show != showForYou }

// ShowEnded reports whether the view has the ended table.
func (v *pageView) ShowEnded() bool { return v.Show == showAll || v.Show == showEnded }

type tab struct {
	Key, Label string
	Count      int
	Current    bool
}

// Href is the tab's link.
func (t tab) Href() string {
	if t.Key == showAll {
		return "/"
	}
	return "/?show=" + t.Key
}

// A moment is a time as the page shows it: an age that the page's script
// keeps current, and the full time on hover.
type moment struct {
	Age   string // "12s", "3m"
	Stamp string // local time to the second
	Unix  int64  // milliseconds, for the script
}

func momentOf(now, t time.Time) moment {
	return moment{Age: span(now.Sub(t)), Stamp: t.Local().Format("2006-01-02 15:04:05"), Unix: t.UnixMilli()}
}

type actionView struct {
	actions.Record
	Posted       moment
	Ended        *moment
	CanCancel    bool
	CanReaddress bool
	InPlan       bool // it waits for another action, or another waits for it: the plan view shows its plan
}

// For says whom the action is for.
func (a actionView) For() string {
	if a.To == "" {
		return "anyone"
	}
	return a.To
}

// Outcome is what the action ended with: its result when done, its reason
// when failed or cancelled.
func (a actionView) Outcome() string {
	if a.State == actions.Done {
		return a.Result
	}
	return a.Reason
}

// outcomeShown is how many characters of an outcome show before the rest
// folds away.
const outcomeShown = 140

// OutcomeLong reports whether the outcome folds away, being long or more
// than one line.
func (a actionView) OutcomeLong() bool {
	o := a.Outcome()
	return utf8.RuneCountInString(o) > outcomeShown || strings.Contains(o, "\n")
}

// OutcomeShort is the start of a long outcome, on one line.
func (a actionView) OutcomeShort() string {
	o, _, _ := strings.Cut(a.Outcome(), "\n")
	if r := []rune(o); len(r) > outcomeShown {
		o = string(r[:outcomeShown])
	}
	return o + "…"
}

type agentView struct {
	actions.MemberInfo
	Joined    moment
	Waiter    *moment
	Reserves  []reservationView // the paths it reserves
	HoldsBack []string          // ids of the open actions its reservations hold back
}

// ClientTitle is the agent CLI the identity's bridge serves, as people
// know it ("Codex CLI"); its short name when bee does not know it.
func (a agentView) ClientTitle() string {
	if t := ancestry.Client(a.Client).Title(); t != "" {
		return t
	}
	return a.Client
}

// A flash is a message the next full page shows once: the outcome of a
// form. A refused post keeps what was typed.
type flash struct {
	Error bool
	Text  string
	Post  postForm
}

// Shown is the flash's text as the page shows it: it quotes the board
// (a title), made inert as shownRecord does.
func (f *flash) Shown() string { return termtext.Line(f.Text) }

// postForm is what the post form holds.
type postForm struct {
	Title, Body, To string
}

// view reads the board and builds what the page shows for show, or for
// the plan of the action plan when it is not "". The version is read
// before the board, so an event stream that reports a newer one means the
// board may have changed since.
func (s *Server) view(ctx context.Context, sess *session, show, plan string) *pageView {
	v := &pageView{
		Person:   termtext.Line(string(s.person)),
		Location: termtext.Line(s.board.Location()),
		Show:     show,
		CSRF:     sess.csrf,
		Version:  s.hub.version(),
	}
	ctx, cancel := context.WithTimeout(ctx, boardTimeout)
	defer cancel()
	records, err := s.all(ctx)
	if err == nil {
		var members []actions.MemberInfo
		if members, err = s.board.Members(ctx); err == nil {
			now := time.Now()
			v.fill(now, records, members)
			v.fillForYou(now, records, s.person)
			// Without its reservations the board is still worth showing.
			if rs, rerr := s.board.Reservations(ctx, ""); rerr != nil {
				s.logger.Warn("board page cannot read the reservations", logkey.Err, rerr)
				v.Err = termtext.Line("The reservations could not be read: " + rerr.Error() + ". The page tries again at the next change; reload to try now.")
			} else {
				v.fillReservations(now, rs, records)
			}
		}
	}
	if err == nil && plan != "" {
		v.Plan = s.planOf(ctx, plan)
		for i := range v.Tabs {
			v.Tabs[i].Current = false
		}
	}
	if err != nil {
		s.logger.Warn("board page cannot read the board", logkey.Err, err)
		v.Err = termtext.Line("The board could not be read: " + err.Error() + ". The page tries again at the next change; reload to try now.")
	}
	return v
}

// all returns every action on the board, oldest first.
func (s *Server) all(ctx context.Context) ([]actions.Record, error) {
	var out []actions.Record
	for cursor := actions.Cursor(""); ; {
		page, err := s.board.List(ctx, cursor)
		if err != nil {
			return nil, fmt.Errorf("list the actions: %w", err)
		}
		if len(page.Records) == 0 {
			return out, nil
		}
		out = append(out, page.Records...)
		cursor = page.Cursor
	}
}

// fill sorts the records and members into the view.
func (v *pageView) fill(now time.Time, records []actions.Record, members []actions.MemberInfo) {
	var open, claimed int
	var ended []actions.Record
	for _, r := range records {
		switch {
		case r.State == actions.Open:
			open++
		case r.State == actions.Claimed:
			claimed++
		case r.State.Ended():
			ended = append(ended, r)
			continue
		}
		if v.Show == showAll || string(r.State) == v.Show {
			v.Active = append(v.Active, actionOf(now, r))
		}
	}
	planned := inPlans(records)
	for i := range v.Active {
		v.Active[i].InPlan = planned[v.Active[i].ID]
	}
	v.Tabs = []tab{
		{Key: showAll, Label: "All", Count: len(records)},
		{Key: showOpen, Label: "Open", Count: open},
		{Key: showClaimed, Label: "Claimed", Count: claimed},
		{Key: showEnded, Label: "Ended", Count: len(ended)},
	}
	for i := range v.Tabs {
		v.Tabs[i].Current = v.Tabs[i].Key == v.Show
	}
	if v.ShowEnded() {
		v.fillEnded(now, ended, planned)
	}
	v.fillAgents(now, members)
}

// fillEnded shows the ended records, the latest first, as many as the
// tab shows.
func (v *pageView) fillEnded(now time.Time, ended []actions.Record, planned map[string]bool) {
	slices.SortStableFunc(ended, func(a, b actions.Record) int { return endedAt(b).Compare(endedAt(a)) })
	limit := endedOnAll
	if v.Show == showEnded {
		limit = endedOnEnded
	}
	if len(ended) > limit {
		v.EndedMore = len(ended) - limit
		ended = ended[:limit]
	}
	for _, r := range ended {
		a := actionOf(now, r)
		a.InPlan = planned[r.ID]
		v.Ended = append(v.Ended, a)
	}
}

// fillAgents shows the live members, and offers their agent names, then
// their identities, as recipients.
func (v *pageView) fillAgents(now time.Time, members []actions.MemberInfo) {
	seen := map[string]bool{}
	var ids []string
	for _, m := range members {
		m = shownMember(m)
		av := agentView{MemberInfo: m, Joined: momentOf(now, m.JoinedAt)}
		if m.WaiterSince != nil {
			w := momentOf(now, *m.WaiterSince)
			av.Waiter = &w
		}
		v.Agents = append(v.Agents, av)
		if !seen[m.Agent] {
			seen[m.Agent] = true
			v.Recipients = append(v.Recipients, m.Agent)
		}
		ids = append(ids, string(m.ID))
	}
	v.Recipients = append(v.Recipients, ids...)
}

// shownRecord is r as the page shows it: every text from the board made
// inert by bee's one rule (package termtext), as the command line shows
// it. html/template escapes markup, but not a bidi override that reverses
// what is read, a zero-width character that hides in a name, or a control
// character.
func shownRecord(r actions.Record) actions.Record {
	for _, f := range []*string{&r.ID, &r.To, &r.From, &r.Title, &r.Holder, &r.EndedBy, &r.Repo} {
		*f = termtext.Line(*f)
	}
	r.Paths = slices.Clone(r.Paths)
	for i := range r.Paths {
		r.Paths[i] = termtext.Line(r.Paths[i])
	}
	r.HeldBackBy = slices.Clone(r.HeldBackBy)
	for i := range r.HeldBackBy {
		h := &r.HeldBackBy[i]
		h.Reservation, h.Holder, h.Pattern = termtext.Line(h.Reservation), termtext.Line(h.Holder), termtext.Line(h.Pattern)
	}
	for _, f := range []*string{&r.Body, &r.Result, &r.Reason} {
		*f = termtext.Text(*f)
	}
	r.State = actions.State(termtext.Line(string(r.State)))
	return r
}

// shownMember is m as the page shows it, its text made inert as
// shownRecord does.
func shownMember(m actions.MemberInfo) actions.MemberInfo {
	m.ID = identity.ID(termtext.Line(string(m.ID)))
	for _, f := range []*string{&m.Agent, &m.Host, &m.SessionID, &m.Client} {
		*f = termtext.Line(*f)
	}
	holding := make([]string, len(m.Holding))
	for i, id := range m.Holding {
		holding[i] = termtext.Line(id)
	}
	m.Holding = holding
	return m
}

func actionOf(now time.Time, r actions.Record) actionView {
	r = shownRecord(r)
	a := actionView{
		Record:       r,
		Posted:       momentOf(now, r.PostedAt),
		CanCancel:    !r.State.Ended(),
		CanReaddress: r.State == actions.Open || r.State == actions.Blocked,
	}
	if r.EndedAt != nil {
		m := momentOf(now, *r.EndedAt)
		a.Ended = &m
	}
	return a
}

// endedAt is when r ended, or when it was posted if the board did not say.
func endedAt(r actions.Record) time.Time {
	if r.EndedAt != nil {
		return *r.EndedAt
	}
	return r.PostedAt
}

// span writes a duration compactly, rounded down to its largest unit, as
// bee's command line does: "12s", "3m", "5h", "2d".
func span(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// plainWords says why the board refused what a person asked, for the
// person: the board's own message names the action and the people
// involved, so it leads; a word on what to do follows where there is one.
func plainWords(what string, err error) string {
	msg := "Could not " + what + ": " + err.Error() + "."
	switch {
	case errors.Is(err, actions.ErrEmptyTitle):
		return "Could not " + what + ": an action needs a title."
	case errors.Is(err, actions.ErrEmptyAnswer):
		return "Could not " + what + ": the answer is blank. Write something the agent that asked can act on."
	case errors.Is(err, actions.ErrEmptyReason):
		return "Could not " + what + ": say why. The agent that asked reads it."
	case errors.Is(err, actions.ErrUnknownAction):
		return "Could not " + what + ": no action has that id (" + err.Error() + ")."
	case errors.Is(err, actions.ErrNotLive):
		return msg + " Address it to the agent's name instead, and any of its sessions can take it."
	case errors.Is(err, actions.ErrEnded):
		return msg + " Nothing more can be done to an action that has ended."
	case errors.Is(err, context.DeadlineExceeded):
		return "Could not " + what + ": the board did not answer in time. Try again."
	}
	return msg
}
