package bridge

import (
	"fmt"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/textcut"
)

// People in the loop, the bridge's side: an agent asks a person by posting
// to "user:<name>" or "people" (bee_post_action), is told to end its turn,
// and is woken by the answer as by any outcome, with a line that reads as
// an answer.

// askNote is what bee_post_action's description says about asking people.
const askNote = "Ask a person (to: user:<name>, or people) when you reach a decision you must not take alone: " +
	"approving a migration or anything destructive, choosing between designs, a credential or a secret, a question only the user can settle. " +
	"Put the question in title and the options and your recommendation in body, then end your turn: no agent takes it, " +
	"and the person's answer comes back as its outcome (done, the answer as result; or failed, declined with a reason). "

// askedNext is what to do after posting the question id, under the client
// cl: end the turn, as bee wakes the session with the answer; under a
// client bee cannot wake, await it.
func askedNext(cl clients.Client, id string) string {
	if !cl.Wakes {
		return fmt.Sprintf("Asked as %s: no agent takes it; a person answers it. bee cannot wake this %s session: "+
			"call %s with ids [%q] (again after an empty result) to hear the answer, and do not decide the question yourself meanwhile.",
			id, cl.Title(), ToolAwait, id)
	}
	return fmt.Sprintf("Asked as %s: no agent takes it; a person answers it. End your turn now and do not decide the question yourself meanwhile: "+
		"bee wakes this session with the answer (done, the answer as result) or the decline (failed, with the reason). "+
		"%s withdraws the question if you no longer need it.", id, ToolCancel)
}

// answerLine is the wake line of an outcome of r, a question the session
// asked that a person answered or declined; ok is false for any other
// outcome. An answer too long for the line ends by saying where the whole
// of it is.
func answerLine(r actions.Record) (line string, ok bool) {
	if !actions.ForPeople(r.To) || !actions.IsUser(r.EndedBy) {
		return "", false
	}
	title := `"` + textcut.Within(oneLine(r.Title), 100) + `"`
	switch r.State {
	case actions.Done:
		line = fmt.Sprintf("bee: %s answered your question %s (%s): %s", r.EndedBy, r.ID, title, oneLine(r.Result))
	case actions.Failed:
		line = fmt.Sprintf("bee: %s declined your question %s (%s): %s", r.EndedBy, r.ID, title, oneLine(r.Reason))
	default:
		return "", false
	}
	line = oneLine(line)
	if len(line) > MaxWakeLine {
		more := fmt.Sprintf(" (all of it: %s with ids [%q])", ToolAwait, r.ID)
		line = textcut.Within(line, MaxWakeLine-len(more)) + more
	}
	return line, true
}
