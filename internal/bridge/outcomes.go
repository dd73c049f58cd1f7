package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
)

// Tool names of the outcome tools: how an action ends other than done, and
// how its poster waits for it to end.
const (
	ToolFail   = "bee_fail_action"
	ToolCancel = "bee_cancel_action"
	ToolAwait  = "bee_await_action"
)

// maxAwaitIDs bounds the ids one bee_await_action call may wait for.
const maxAwaitIDs = 100

// addOutcomeTools registers bee_fail_action, bee_cancel_action and
// bee_await_action on srv.
func addOutcomeTools(srv *mcp.Server, t *tools) {
	srv.AddTool(&mcp.Tool{
		Name:  ToolFail,
		Title: "Fail an action",
		Description: "Mark an action you hold (claimed through bee_wait_action) as failed, saying why it cannot be done: " +
			"missing access, a wrong premise, broken input. Its poster is told the reason, and nobody retries it blindly. " +
			"If someone else could do it, call bee_release_action instead. Pass the id exactly as it was returned. Returns {action}.",
		InputSchema:  failInputSchema,
		OutputSchema: actionOutputSchema,
	}, t.logged(t.fail, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolCancel,
		Title: "Cancel an action you posted",
		Description: "Call off an action you (or an earlier identity of your agent) posted that is no longer needed, " +
			"whether it is still open or someone holds it, with an optional reason. Its holder's next bee_finish_action " +
			"is refused with your reason. Returns {action}.",
		InputSchema:  cancelInputSchema,
		OutputSchema: actionOutputSchema,
	}, t.logged(t.cancel, setupBound))
	srv.AddTool(&mcp.Tool{
		Name:  ToolAwait,
		Title: "Wait for actions to end",
		Description: "Wait until at least one of the given actions has ended (done, failed or cancelled) and return those records. " +
			"Use it when you posted work for another agent with bee_post_action and need its outcome before you can go on. " +
			"Returns {records}; empty when none ended within timeoutSeconds (default 45, at most 60). " +
			"A failed action carries the reason it could not be done: read it and decide (fix what it names and post again, " +
			"do it yourself, or tell the user); do not post the same action again unchanged.",
		InputSchema:  awaitInputSchema,
		OutputSchema: recordsOutputSchema,
	}, t.logged(t.await, awaitBound))
}

func (t *tools) fail(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	c, refused := parseActionCall(s, req, "reason")
	if refused != nil {
		return refused, nil
	}
	reason, err := c.str("reason")
	if err != nil {
		return toolError(err), nil
	}
	if strings.TrimSpace(reason) == "" {
		return toolError(&argError{name: "reason", msg: "must say why the action cannot be done"}), nil
	}
	rec, err := s.source.Fail(ctx, c.who, c.id, reason)
	if err != nil {
		return sourceError(err), nil
	}
	t.log.Info("action failed", logkey.Identity, c.who, logkey.ActionID, rec.ID)
	return result(actionResult{rec}, fmt.Sprintf("Action %s is failed; %s will be told why.", rec.ID, rec.From)), nil
}

func (t *tools) cancel(ctx context.Context, s *Session, req *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, error) {
	c, refused := parseActionCall(s, req, "reason")
	if refused != nil {
		return refused, nil
	}
	reason, err := c.optString("reason")
	if err != nil {
		return toolError(err), nil
	}
	rec, err := s.source.Cancel(ctx, actions.Agent(c.who), c.id, reason)
	if err != nil {
		return sourceError(err), nil
	}
	t.log.Info("action cancelled", logkey.Identity, c.who, logkey.ActionID, rec.ID)
	text := fmt.Sprintf("Action %s is cancelled.", rec.ID)
	if rec.Holder != "" {
		text += fmt.Sprintf(" Its holder %s is told when it next tries to finish it.", rec.Holder)
	}
	return result(actionResult{rec}, text), nil
}

// recordsResult is what bee_await_action returns.
type recordsResult struct {
	Records []actions.Record `json:"records"`
}

// awaitBound is bee_await_action's own bound, as waitBound is the wait's.
func awaitBound(req *mcp.CallToolRequest) time.Duration {
	return timeoutArg(req, "ids", "timeoutSeconds")
}

func (t *tools) await(ctx context.Context, s *Session, req *mcp.CallToolRequest, deadline time.Time) (*mcp.CallToolResult, error) {
	a, err := parseArgs(req.Params.Arguments, "ids", "timeoutSeconds")
	if err != nil {
		return toolError(err), nil
	}
	secs, err := a.integer("timeoutSeconds", 1, int(MaxWait/time.Second), int(DefaultWait/time.Second))
	if err != nil {
		return toolError(err), nil
	}
	ids, err := a.strings("ids", maxAwaitIDs)
	if err != nil {
		return toolError(err), nil
	}
	who, _, err := s.current()
	if err != nil {
		return sourceError(err), nil
	}
	// While the model awaits, the waiter is silent: the await itself
	// returns the outcome, and nothing should be told twice.
	defer s.beginWait()()
	timeout := max(time.Until(deadline), time.Millisecond)
	stopProgress := t.startProgress(ctx, req, deadline)
	recs, err := s.source.Await(ctx, actions.Agent(who), ids, timeout)
	stopProgress()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return sourceError(err), nil
	}
	c := clients.FromRequest(req)
	return result(recordsResult{Records: recs}, renderAwait(recs, int(c.Cap(time.Duration(secs)*time.Second)/time.Second), c)), nil
}

// renderAwait says what ended, and what to do with a failure.
func renderAwait(recs []actions.Record, secs int, c clients.Client) string {
	if len(recs) == 0 {
		return c.EmptyAwait(secs)
	}
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(outcomeLine(r))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// outcomeLine says in one line how an ended action ended.
func outcomeLine(r actions.Record) string {
	switch r.State {
	case actions.Done:
		if r.Result == "" {
			return fmt.Sprintf("Action %s %q is done by %s.", r.ID, r.Title, r.EndedBy)
		}
		return fmt.Sprintf("Action %s %q is done by %s: %s", r.ID, r.Title, r.EndedBy, r.Result)
	case actions.Failed:
		return fmt.Sprintf("Action %s %q FAILED (%s): %s", r.ID, r.Title, r.EndedBy, r.Reason)
	case actions.Cancelled:
		why := ""
		if r.Reason != "" {
			why = ": " + r.Reason
		}
		return fmt.Sprintf("Action %s %q was cancelled by %s%s", r.ID, r.Title, r.EndedBy, why)
	}
	return fmt.Sprintf("Action %s %q is %s.", r.ID, r.Title, r.State)
}

// strings returns the named argument, which must be a JSON array of 1 to
// max non-empty strings.
func (a args) strings(name string, max int) ([]string, error) {
	if !a.present(name) {
		return nil, &argError{name: name, msg: "is required (an array of action ids)"}
	}
	v := bytes.TrimSpace(a[name])
	var ss []string
	if err := json.Unmarshal(v, &ss); err != nil {
		return nil, &argError{name: name, msg: fmt.Sprintf("must be an array of action id strings; got %s", describe(v))}
	}
	switch {
	case len(ss) == 0:
		return nil, &argError{name: name, msg: "must hold at least one action id"}
	case len(ss) > max:
		return nil, &argError{name: name, msg: fmt.Sprintf("holds %d ids; at most %d", len(ss), max)}
	}
	for i, s := range ss {
		if strings.TrimSpace(s) == "" {
			return nil, &argError{name: name, msg: fmt.Sprintf("item %d is empty", i)}
		}
	}
	return ss, nil
}
