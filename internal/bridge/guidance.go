package bridge

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
)

// Guidance is what a bee tool's answer tells the model to do, in the
// structured content the model reads: Claude Code hands the model a tool's
// structured content, not its text, so nothing the model must know may
// live only in the text. Every answer type embeds it; a refusal's
// structured content is a Guidance alone, which every output schema admits
// (none requires a property).
type Guidance struct {
	Error string `json:"error,omitempty" jsonschema:"Set when bee refused the call: what was wrong. Read next for what to do."`
	Next  string `json:"next,omitempty" jsonschema:"What to do now."`
}

// What an empty wait tells the model: the heart of wake on work. A model
// that calls bee_wait_action again in a loop costs a model turn a minute.
const emptyWaitNext = "There is no work for you now: end your turn. Do not call " + ToolWait +
	" again in a loop; bee wakes this session when an action arrives for you, and then you call " + ToolWait + " to take it."

// refusal answers a call the tool refused: IsError, with the error and
// what to do about it as structured content, and the same JSON as text for
// clients that read only text.
func refusal(tool string, err error) *mcp.CallToolResult {
	res := answer(Guidance{Error: err.Error(), Next: nextAfter(tool, err)})
	res.IsError = true
	return res
}

// answer is a tool result holding v as structured content, and as text.
func answer(v any) *mcp.CallToolResult {
	raw, err := json.Marshal(v)
	if err != nil {
		// Every answer type marshals; this is a programmer's error.
		panic(fmt.Sprintf("bridge: marshal %T: %v", v, err))
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(raw), Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
}

// errRetired is what a wait whose identity was retired under it (/clear)
// ends with.
var errRetired = errors.New("the identity this wait ran as was retired (the session was cleared)")

// errOpening and errNotStarted are what a call gets when the session is
// not set up: the board is still opening, or could not be.
var (
	errOpening    = errors.New("bee's board is still opening")
	errNotStarted = errors.New("bee could not start")
)

// nextAfter says what to do after tool refused the call with err.
func nextAfter(tool string, err error) string {
	if next := planNext(tool, err); next != "" {
		return next
	}
	if next, ok := reservationNext(tool, err); ok {
		return next
	}
	var ae *argError
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("Call %s again with argument %s as its input schema describes it.", tool, ae.name)
	case errors.Is(err, errRetired):
		return "Call " + ToolWait + " again: it waits as your new identity."
	case errors.Is(err, actions.ErrDeparted):
		return "If this session carries on, call " + tool + " again: " + newBridgeTakesOver + "."
	case errors.Is(err, errOpening):
		return "Call " + tool + " again in a few seconds."
	case errors.Is(err, errNotStarted):
		return "Tell the user that bee could not start, and why: once that is fixed, a restart of the session (or /mcp reconnect) starts it again."
	case errors.Is(err, actions.ErrBadCursor):
		return "Call " + tool + " again without a cursor, or with one exactly as a bee tool returned it."
	case errors.Is(err, actions.ErrUnknownAction):
		return "Check the id: pass it exactly as a bee tool returned it (" + ToolList + " lists the board)."
	case errors.Is(err, actions.ErrNotHeld):
		return "Only the identity that holds an action may finish, fail or release it: leave this one, and call " + ToolWait + " to take work of your own."
	case errors.Is(err, actions.ErrEnded):
		return "It has ended and never changes again: stop working on it, and tell whoever asked you for it."
	case errors.Is(err, actions.ErrNotPoster):
		return "Only an identity of the agent that posted it, or a person, may cancel it: tell the user instead."
	case errors.Is(err, actions.ErrNotLive):
		return "Post to one of the live identities the error names, or to the agent name: any of its sessions may take it."
	case errors.Is(err, actions.ErrReadOnly):
		return "This bridge serves no board (its source is none): tell the user; nothing on a board can be done from here."
	case errors.Is(err, actions.ErrBadRecipient), errors.Is(err, actions.ErrTooLong), errors.Is(err, actions.ErrBadText),
		errors.Is(err, actions.ErrEmptyTitle), errors.Is(err, actions.ErrEmptyReason):
		return "Call " + tool + " again with the argument fixed as the error says."
	}
	return "Tell the user what failed; call " + tool + " again once it is fixed."
}
