package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/textcut"
)

// listIn is bee_list_actions' arguments.
type listIn struct {
	Since string `json:"since,omitempty" jsonschema:"A cursor from an earlier answer: list only actions after it. Omit it to list the board from its start."`
}

// listOut is bee_list_actions' answer.
type listOut struct {
	Records []listedRecord `json:"records" jsonschema:"The actions of this page, oldest first."`
	Cursor  actions.Cursor `json:"cursor" jsonschema:"Where this page ends: pass it as since for the actions after these."`
	Guidance
}

// A listedRecord is an action as a list shows it: its long texts may be
// cut short, to keep the answer within maxListAnswer.
type listedRecord struct {
	actions.Record
	Cut bool `json:"cut,omitempty" jsonschema:"Set when this list cut the action's title, body, result or reason short."`
}

// maxListAnswer bounds a bee_list_actions answer, in bytes of JSON: a page
// of the board can hold a megabyte (100 records of 10 KiB, or one huge
// one), which would fill a model's context. Texts are cut, longest share
// first, until the page fits or every text is down to minListText.
const (
	maxListAnswer = 64 << 10
	minListText   = 32
)

func (t *tools) list(ctx context.Context, c *toolCall, in listIn) (listOut, error) {
	page, err := c.s.source.List(ctx, actions.Cursor(in.Since))
	if errors.Is(err, actions.ErrBadCursor) {
		return listOut{}, &argError{name: "since", msg: err.Error() + "; pass a cursor exactly as a bee tool returned it, or omit it"}
	}
	if err != nil {
		return listOut{}, err
	}
	out := boundList(page)
	switch {
	case len(out.Records) == 0:
		out.Next = "There are no actions after since: this is the end of the board."
	default:
		out.Next = "To see the actions after these, call " + ToolList + " with since set to cursor (an empty page means the end). " +
			"A record with cut set shows its texts cut short here; an action you take with " + ToolWait + " comes whole."
	}
	return out, nil
}

// boundList turns a page into a list answer of at most maxListAnswer
// bytes of JSON, cutting the texts of its records to an equal share.
func boundList(page actions.Page) listOut {
	out := listOut{Cursor: page.Cursor}
	out.Records = boundRecords(page.Records, func(recs []listedRecord) any {
		o := out
		o.Records = recs
		return o
	})
	return out
}

// boundRecords returns recs as an answer lists them: wrap(records) makes
// the answer, which must stay within maxListAnswer bytes of JSON (with
// room for the guidance), so each record's long texts are cut to an equal
// share until it does, or until every text is down to minListText.
func boundRecords(recs []actions.Record, wrap func([]listedRecord) any) []listedRecord {
	out := make([]listedRecord, len(recs))
	share := maxListAnswer
	for {
		for i, r := range recs {
			out[i] = cutRecord(r, share)
		}
		raw, _ := json.Marshal(wrap(out))
		if len(raw) <= maxListAnswer-1024 || share <= minListText { // room for the guidance
			return out
		}
		share = max(minListText, min(share, maxListAnswer/max(1, len(recs)))/2)
	}
}

// cutRecord is r as a list shows it, each long text at most n bytes.
func cutRecord(r actions.Record, n int) listedRecord {
	l := listedRecord{Record: r}
	for _, s := range []*string{&l.Title, &l.Body, &l.Result, &l.Reason} {
		if len(*s) > n {
			*s = textcut.Within(*s, n)
			l.Cut = true
		}
	}
	return l
}

// whoamiOut is bee_whoami's answer.
type whoamiOut struct {
	Whoami
	Guidance
}

func (t *tools) whoami(_ context.Context, c *toolCall, _ struct{}) (whoamiOut, error) {
	w := c.s.Whoami()
	w.Client = clients.FromRequest(c.req).String()
	return whoamiOut{Whoami: w}, nil
}

// postIn is bee_post_action's arguments.
type postIn struct {
	To    string       `json:"to,omitempty" jsonschema:"Who may take it: omit it for anyone, an agent name (such as reviewer), or one identity (agent:reviewer#0491068b). To ask a person, user:<name> (one person, such as user:alice) or people (whoever answers first)."`
	Title string       `json:"title" jsonschema:"One line saying what to do."`
	Body  string       `json:"body" jsonschema:"Everything the taker needs to do it."`
	Paths pathPatterns `json:"paths,omitempty" jsonschema:"The files the work will change, as path patterns of this session's repository (src/auth/**): whoever takes it holds them while working on it."`
	// Plans (plantools.go).
	After    afterIDs `json:"after,omitempty" jsonschema:"Ids of existing actions that must be done before this one can be taken, exactly as bee returned them. It stays blocked until every one is done, and is cancelled if one fails or is cancelled. For several new steps with an order, post them together with bee_post_plan."`
	Priority priority `json:"priority,omitzero" jsonschema:"0 (most urgent) to 4; default 2. Of the open actions someone may take, the most urgent is taken first."`
}

// writeBound bounds each write a tool makes (post, finish, release, fail,
// cancel, a plan's post): a board's server that falls silent cannot hold
// the call longer (the PostgreSQL board then answers that it may have
// been made or not, and to look before doing it again). It is above the
// file board's lock wait (5 s), which gives up first with who holds it.
const writeBound = 10 * time.Second

// actionOut is what post, finish, release, fail and cancel answer.
type actionOut struct {
	Action actions.Record `json:"action" jsonschema:"The action as it is now."`
	Guidance
}

func (t *tools) post(ctx context.Context, c *toolCall, in postIn) (actionOut, error) {
	who, _, err := c.s.current()
	if err != nil {
		return actionOut{}, err
	}
	d := actions.Draft{To: in.To, Title: in.Title, Body: in.Body, After: in.After, Priority: in.Priority.ptr()}
	if err := c.s.withPaths(&d, in.Paths); err != nil {
		return actionOut{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	rec, err := c.s.source.Post(wctx, actions.Agent(who), d)
	if errors.Is(err, actions.ErrEmptyTitle) {
		return actionOut{}, &argError{name: "title", msg: "must not be empty"}
	}
	if err != nil {
		return actionOut{}, err
	}
	t.log.Info("action posted", logkey.Identity, who, logkey.ActionID, rec.ID)
	rec = c.s.viewed(ctx, rec)
	return actionOut{Action: rec, Guidance: Guidance{Next: heldBackNext(rec) + postedNext(clients.FromRequest(c.req), rec)}}, nil
}

// idIn is the arguments of a tool that takes only an action's id.
type idIn struct {
	ID string `json:"id" jsonschema:"The action's id exactly as a bee tool returned it."`
}

// finishIn is bee_finish_action's arguments.
type finishIn struct {
	ID     string `json:"id" jsonschema:"The action's id exactly as bee_wait_action returned it."`
	Result string `json:"result,omitempty" jsonschema:"What you did or found, for whoever posted the action."`
}

func (t *tools) finish(ctx context.Context, c *toolCall, in finishIn) (actionOut, error) {
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	return t.change(c, in.ID, "action finished", func(who identity.ID) (actions.Record, error) {
		return c.s.source.Finish(wctx, who, in.ID, in.Result)
	})
}

func (t *tools) release(ctx context.Context, c *toolCall, in idIn) (actionOut, error) {
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	return t.change(c, in.ID, "action released", func(who identity.ID) (actions.Record, error) {
		return c.s.source.Release(wctx, who, in.ID)
	})
}

// failIn is bee_fail_action's arguments.
type failIn struct {
	ID     string `json:"id" jsonschema:"The action's id exactly as bee_wait_action returned it."`
	Reason string `json:"reason" jsonschema:"Why it cannot be done, for whoever posted it."`
}

func (t *tools) fail(ctx context.Context, c *toolCall, in failIn) (actionOut, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return actionOut{}, &argError{name: "reason", msg: "must say why the action cannot be done"}
	}
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	return t.change(c, in.ID, "action failed", func(who identity.ID) (actions.Record, error) {
		return c.s.source.Fail(wctx, who, in.ID, in.Reason)
	})
}

// cancelIn is bee_cancel_action's arguments.
type cancelIn struct {
	ID     string `json:"id" jsonschema:"The id of an action your agent posted, exactly as bee_post_action returned it."`
	Reason string `json:"reason,omitempty" jsonschema:"Why it is no longer needed, for whoever holds it."`
}

func (t *tools) cancel(ctx context.Context, c *toolCall, in cancelIn) (actionOut, error) {
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	return t.change(c, in.ID, "action cancelled", func(who identity.ID) (actions.Record, error) {
		return c.s.source.Cancel(wctx, actions.Agent(who), in.ID, in.Reason)
	})
}

// change makes one change to the action id as the session's identity,
// with do, and logs msg when it is made. Whatever the outcome, the model
// has acted on id: a claim of it that a wait handed over is followed up
// (see held.go).
func (t *tools) change(c *toolCall, id, msg string, do func(who identity.ID) (actions.Record, error)) (actionOut, error) {
	who, _, err := c.s.current()
	if err != nil {
		return actionOut{}, err
	}
	c.s.followedUp(id)
	rec, err := do(who)
	if err != nil {
		return actionOut{}, err
	}
	t.log.Info(msg, logkey.Identity, who, logkey.ActionID, rec.ID)
	out := actionOut{Action: rec}
	if rec.State == actions.Cancelled && rec.Holder != "" {
		out.Next = fmt.Sprintf("Its holder %s is told when it next tries to finish it.", rec.Holder)
	}
	return out, nil
}
