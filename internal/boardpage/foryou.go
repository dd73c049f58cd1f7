package boardpage

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/termtext"
)

// The "For you" view: the questions that wait for the page's person (open
// actions addressed to it, "user:<name>", or to people), oldest first,
// each with an answer box and a decline; their count in the tabs and in
// the browser tab's title; and, in the agents list, each agent that asked
// one shown as waiting on you.
//
// Answering and declining are two more of the page's forms (POST /answer,
// POST /decline), behind the same guard as the others (guard.go): the
// loopback Host and same-origin rules, the session cookie and the
// session's CSRF token. They act as the Server's person only: no form
// field says who answers, and the board itself refuses a question for
// someone else, one that has ended and a blank answer, as it does for bee
// answer and bee decline.

// showForYou is the "For you" view's ?show=.
const showForYou = "foryou"

// forYou is what the page shows of the questions for its person.
type forYou struct {
	// Questions wait for the person, oldest first.
	Questions []actionView
	// waiting maps a live agent identity (as the page shows it) to the
	// ids of the questions it waits on, oldest first.
	waiting map[string][]string
}

// fillForYou finds, among records (oldest first), the questions for
// person, adds the "For you" tab first, and marks as waiting on the person
// each live agent that asked one: the identity that asked, or, when that
// identity is no longer live (a /clear), the live identities of its agent,
// which hear the answer in its place. It runs after fill, which lists the
// live agents.
func (v *pageView) fillForYou(now time.Time, records []actions.Record, person actions.Poster) {
	live := map[string]bool{}
	for _, a := range v.Agents {
		live[string(a.ID)] = true
	}
	v.ForYou.waiting = map[string][]string{}
	for _, r := range records {
		if !actions.AskedOf(r, person) {
			continue
		}
		q := actionOf(now, r)
		v.ForYou.Questions = append(v.ForYou.Questions, q)
		switch from := identity.ID(q.From); {
		case live[q.From]:
			v.ForYou.waiting[q.From] = append(v.ForYou.waiting[q.From], q.ID)
		case identity.IsID(q.From):
			for _, a := range v.Agents {
				if a.Agent == from.Agent() {
					v.ForYou.waiting[string(a.ID)] = append(v.ForYou.waiting[string(a.ID)], q.ID)
				}
			}
		}
	}
	first := tab{Key: showForYou, Label: "For you", Count: len(v.ForYou.Questions), Current: v.Show == showForYou}
	v.Tabs = slices.Insert(v.Tabs, 0, first)
}

// ShowForYou reports whether the view shows the questions: always in the
// "For you" view, and at the top of the "all" view when there are any.
func (v *pageView) ShowForYou() bool {
	return v.Show == showForYou || (v.Show == showAll && len(v.ForYou.Questions) > 0)
}

// ForMe reports whether q is addressed to the page's person by name (not
// to people).
func (v *pageView) ForMe(q actionView) bool { return q.To == v.Person }

// WaitingOnYou returns the ids of the questions the agent identity id
// waits on the person for, or nil.
func (v *pageView) WaitingOnYou(id identity.ID) []string { return v.ForYou.waiting[string(id)] }

// DocTitle is the browser tab's title: how many questions wait, first.
func (v *pageView) DocTitle() string {
	if n := len(v.ForYou.Questions); n > 0 {
		return "(" + strconv.Itoa(n) + ") bee board"
	}
	return "bee board"
}

// handleAnswer answers, as the Server's person, the question the form
// names: it is done, with the text as its result, and its asker is woken.
func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request, sess *session) {
	id := strings.TrimSpace(r.PostForm.Get("id"))
	ctx, cancel := boardCtx(r)
	defer cancel()
	rec, err := s.board.Answer(ctx, s.person, id, lf(r.PostForm.Get("text")))
	if err != nil {
		s.done(w, r, sess, &flash{Error: true, Text: plainWords("answer "+id, err)})
		return
	}
	s.logger.Info("board page answered", logkey.ActionID, rec.ID)
	s.done(w, r, sess, &flash{Text: "Answered " + rec.ID + " for " + termtext.Line(rec.From) + ": " + rec.Title})
}

// handleDecline declines, as the Server's person, the question the form
// names: it fails, with the reason, and its asker is woken.
func (s *Server) handleDecline(w http.ResponseWriter, r *http.Request, sess *session) {
	id := strings.TrimSpace(r.PostForm.Get("id"))
	ctx, cancel := boardCtx(r)
	defer cancel()
	rec, err := s.board.Decline(ctx, s.person, id, lf(strings.TrimSpace(r.PostForm.Get("reason"))))
	if err != nil {
		s.done(w, r, sess, &flash{Error: true, Text: plainWords("decline "+id, err)})
		return
	}
	s.logger.Info("board page declined", logkey.ActionID, rec.ID)
	s.done(w, r, sess, &flash{Text: "Declined " + rec.ID + " for " + termtext.Line(rec.From) + ": " + rec.Title})
}
