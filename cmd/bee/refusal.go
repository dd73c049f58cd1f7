package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// The board's errors are written for every caller, agents included: they
// name the operation ("cancel action …"), end in their sentinel's name
// (": unknown action") and sometimes tell an agent what to do. refusal
// turns them into one message for a person: the command, the cause once,
// and on a "Try:" line what to do.

// sentinels are the errors whose names end the board's messages; once a
// message has said the cause in full, the name adds nothing.
var sentinels = []error{
	actions.ErrUnknownAction, actions.ErrNotHeld, actions.ErrEnded, actions.ErrNotPoster, actions.ErrNotOpen,
	actions.ErrNotLive, actions.ErrEmptyTitle, actions.ErrEmptyReason, actions.ErrDeparted,
	actions.ErrBadRecipient, actions.ErrBadPoster, actions.ErrTooLong, actions.ErrBadText,
	actions.ErrPrerequisiteEnded, actions.ErrUnknownPrerequisite, actions.ErrTooManyPrerequisites, actions.ErrBadPriority,
	actions.ErrBadPlan, actions.ErrBadKey, actions.ErrDuplicateKey, actions.ErrCycle, actions.ErrPlanTooLarge,
	actions.ErrBadPattern, actions.ErrBadRepo, actions.ErrReserved, actions.ErrNotForPerson, actions.ErrEmptyAnswer,
}

// wrongInput are the sentinels of a refusal the command line can fix:
// exit 2, as a usage error.
var wrongInput = []error{
	actions.ErrEmptyTitle, actions.ErrEmptyReason, actions.ErrBadRecipient, actions.ErrBadPoster,
	actions.ErrTooLong, actions.ErrBadText, actions.ErrBadPattern, actions.ErrBadRepo, actions.ErrEmptyAnswer,
	actions.ErrUnknownPrerequisite, actions.ErrTooManyPrerequisites, actions.ErrBadPriority,
}

// boardOp matches how the board starts its errors, naming the operation
// ("cancel: ", "readdress a-1: ", "await action "): the command's name
// says it already. The action's id, when it is there, stays.
var boardOp = regexp.MustCompile(`^(?:post|get|list|head|changes|await|cancel|readdress|members|backup|reserve|release paths|reservations|conflicts|answer|decline)(?:: | (action )| a-[0-9]+: )`)

// refusal says, for a person, why the board b refused the command cmd
// about the action id ("" when none): an unknown id names the board and
// how ids look; an ended action says how it ended; any other refusal
// keeps the board's words, without the operation's name and the
// sentinel's. It returns ctx's errors as they are, for Run to report the
// interruption.
func (e *env) refusal(ctx context.Context, b actions.Board, cmd, id string, err error) error {
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	case errors.Is(err, actions.ErrUnknownAction) && id != "":
		return refusedf(err, idHint(cmd, id), "bee %s: no action %q on the board at %s", cmd, id, shown(b.Location()))
	case errors.Is(err, actions.ErrEnded) && id != "":
		if r, gerr := b.Get(ctx, id); gerr == nil && r.State.Ended() {
			return refusedf(err, "an ended action never changes again: post a new one if the work is still wanted",
				"bee %s: %s has ended already: %s", cmd, r.ID, endedWhy(r))
		}
	}
	msg := "bee " + cmd + ": " + plainBoardText(err.Error())
	if errors.Is(err, actions.ErrNotForPerson) {
		return &cliError{code: exitNo, msg: msg, hint: "bee inbox lists the questions that wait for you", err: err}
	}
	for _, s := range wrongInput {
		if errors.Is(err, s) {
			return &cliError{code: exitUsage, msg: msg, hint: "bee " + cmd + " --help", err: err}
		}
	}
	return &cliError{code: exitNo, msg: msg, err: err}
}

// plainBoardText is the board's message without the operation's name in
// front and the sentinels' names at the end.
func plainBoardText(s string) string {
	for {
		before := s
		if m := boardOp.FindStringSubmatchIndex(s); m != nil {
			s = s[m[1]:]
			if m[2] >= 0 {
				s = "action " + s
			}
		}
		for _, sen := range sentinels {
			s = strings.TrimSuffix(s, ": "+sen.Error())
		}
		if s == before {
			return s
		}
	}
}

// endedWhy says how an ended action ended: "cancelled by user:ann (not
// needed)".
func endedWhy(r actions.Record) string {
	why := string(r.State)
	if r.EndedBy != "" {
		why += " by " + r.EndedBy
	}
	switch {
	case r.State == actions.Done && r.Result != "":
		why += " (" + oneLine(r.Result, 80) + ")"
	case r.State != actions.Done && r.Reason != "":
		why += " (" + oneLine(r.Reason, 80) + ")"
	}
	return why
}

// idHint says how to name an action to the command cmd, for an id the
// board does not know: ids are lower case, "a-" and a number; bee list
// shows them.
func idHint(cmd, id string) string {
	if low := strings.ToLower(id); low != id && strings.HasPrefix(low, "a-") {
		return fmt.Sprintf("action ids are lower case: bee %s %s", cmd, low)
	}
	if isDigits(id) {
		n := strings.TrimLeft(id, "0")
		return fmt.Sprintf("action ids look like a-%s: bee %s a-%s", n, cmd, n)
	}
	return "bee list --all shows every action's id"
}

// isDigits reports whether s is a positive number, as people type the id
// they saw as a-7.
func isDigits(s string) bool {
	return strings.Trim(s, "0123456789") == "" && strings.TrimLeft(s, "0") != ""
}
