package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
)

// People in the loop. An action addressed to a person ("user:<name>") or
// to people (actions.People) is an ordinary open action that no claim
// matches: a Want's recipients are anyone, an agent name and an identity,
// and neither a person nor actions.People is one of those (see
// identity.ReservedName). Posting it wakes no agent (wakeup.ForRecipient
// gives it the People key); a person ends it here, and its poster hears of
// it through changeTx like of any other end.

// Answer implements actions.Source: an open action addressed to by (a
// person) or to people becomes done, with text as its result and by as
// its holder and ender, and its poster's waiters wake. It refuses an
// empty text (actions.ErrEmptyAnswer) or one over actions.MaxResultLen
// bytes, a by that is not a person (actions.ErrBadPoster), an action for
// someone else (actions.ErrNotForPerson, naming whom it is for), one that
// is not open (actions.ErrNotOpen) and returns actions.ErrUnknownAction
// or actions.ErrEnded like Finish.
func (e *Engine) Answer(ctx context.Context, by actions.Poster, id, text string) (actions.Record, error) {
	if strings.TrimSpace(text) == "" {
		return actions.Record{}, fmt.Errorf("answer %s: %w: say what the answer is", label(id), actions.ErrEmptyAnswer)
	}
	if err := actions.CheckText("answer", text, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("answer %s: %w", label(id), err)
	}
	return e.reply(ctx, "answer", by, id, Update{State: actions.Done, Text: text})
}

// Decline implements actions.Source: an open action addressed to by (a
// person) or to people becomes failed, with reason, non-empty
// (actions.ErrEmptyReason), kept on it; otherwise as Answer.
func (e *Engine) Decline(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error) {
	if strings.TrimSpace(reason) == "" {
		return actions.Record{}, fmt.Errorf("decline %s: %w: say why you decline it", label(id), actions.ErrEmptyReason)
	}
	if err := actions.CheckText("reason", reason, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("decline %s: %w", label(id), err)
	}
	return e.reply(ctx, "decline", by, id, Update{State: actions.Failed, Text: reason})
}

// reply ends, as u says, the open action id that the person by may answer
// (see actions.CheckReply), in one write transaction through changeTx.
func (e *Engine) reply(ctx context.Context, op string, by actions.Poster, id string, u Update) (actions.Record, error) {
	if by.Kind() != actions.PersonPoster {
		return actions.Record{}, actions.CheckReply(op, by, actions.Record{ID: label(id)})
	}
	u.By, u.Holder, u.Told = string(by), string(by), ToldIfPerson
	rec, err := e.alter(ctx, op, id, func(cur actions.Record) error {
		if err := actions.CheckReply(op, by, cur); err != nil {
			return err
		}
		if cur.State != actions.Open {
			return fmt.Errorf("%s: action %s is %s; a question can be answered only while it is open: %w", op, cur.ID, cur.State, actions.ErrNotOpen)
		}
		return nil
	}, func(t *txn, cur actions.Record) (actions.Record, error) {
		rec, _, err := e.changeTx(t, cur.Seq, "", u)
		return rec, err
	})
	if err != nil {
		return actions.Record{}, err
	}
	e.log.Info("action answered", logkey.ActionID, rec.ID, logkey.Identity, string(by), logkey.State, rec.State)
	return rec, nil
}
