package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
)

// Plans: actions that wait for other actions. bee_post_action takes after
// and priority; bee_post_plan posts several actions at once, all or none,
// each naming the keys of the steps it waits for. The board enforces the
// order: a step stays blocked until what it waits for is done, and one
// that fails or is cancelled cancels every step behind it.

// priority is an action's priority argument: a JSON integer from
// actions.MinPriority (most urgent) to actions.MaxPriority. Its zero value
// means the argument was not given (the board's default).
type priority struct {
	n     int
	given bool
}

func (p *priority) decodeArg(raw json.RawMessage, _ WaitBounds) string {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return fmt.Sprintf("must be a JSON integer from %d (most urgent) to %d; got %s", actions.MinPriority, actions.MaxPriority, describe(raw))
	}
	if n < actions.MinPriority || n > actions.MaxPriority {
		return fmt.Sprintf("must be from %d (most urgent) to %d (default %d); got %d", actions.MinPriority, actions.MaxPriority, actions.DefaultPriority, n)
	}
	*p = priority{n: int(n), given: true}
	return ""
}

func (*priority) want() string { return "a whole number" }

// ptr is the priority as a Draft takes it: nil when not given.
func (p priority) ptr() *int {
	if !p.given {
		return nil
	}
	return &p.n
}

// afterIDs is the after argument of bee_post_action: ids of existing
// actions, at most actions.MaxAfter (the board checks them).
type afterIDs []string

// postedNext is what a post answer tells the model: the action is open,
// or waits for the prerequisites it names.
func postedNext(cl clients.Client, rec actions.Record) string {
	next := fmt.Sprintf("Posted as %s. Go on with other work, or end your turn: bee wakes you when it ends. %s waits for it; %s calls it off.", rec.ID, ToolAwait, ToolCancel)
	switch {
	case actions.ForPeople(rec.To):
		next = askedNext(cl, rec.ID)
	case !cl.Wakes:
		next = cl.PostedNext(rec.ID)
	}
	if rec.State == actions.Blocked {
		next = fmt.Sprintf("It is blocked until %s %s done: nobody can take it before; it opens by itself then, and is cancelled if one of them fails or is cancelled. ",
			strings.Join(rec.BlockedBy, ", "), plural(len(rec.BlockedBy), "is", "are")) + next
	}
	return next
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// planIn is bee_post_plan's arguments.
type planIn struct {
	Actions planEntries `json:"actions" jsonschema:"The plan's steps, in any order: each becomes one action."`
}

// planEntry is one step of bee_post_plan as its schema describes it; the
// decoder fills an actions.PlanEntry of the same fields.
type planEntry struct {
	Key      string   `json:"key" jsonschema:"Names this step within the plan, for the after of other steps and for the ids map of the answer: 1 to 64 letters, digits, '.', '_' or '-' (such as migrate or step-2)."`
	To       string   `json:"to,omitempty" jsonschema:"Who may take it: omit it for anyone, an agent name (such as reviewer), or one identity."`
	Title    string   `json:"title" jsonschema:"One line saying what to do."`
	Body     string   `json:"body" jsonschema:"Everything the taker needs to do it."`
	After    []string `json:"after,omitempty" jsonschema:"What this step waits for: keys of other steps of this plan, and ids of existing actions (a-3). It is blocked, and nobody can take it, until every one of them is done."`
	Priority *int     `json:"priority,omitempty" jsonschema:"0 (most urgent) to 4; default 2. Of the open actions someone may take, the most urgent is taken first."`
	Paths    []string `json:"paths,omitempty" jsonschema:"The files this step will change, as path patterns of this session's repository (src/auth/**): whoever takes it holds them while working on it."`
}

// planEntries is bee_post_plan's list of steps, decoded strictly: each
// entry an object of planEntry's fields, of the right kinds. What the
// entries say (keys, cycles, titles, bounds) is the board's to judge, so
// that every problem of a plan is named in one refusal.
type planEntries []actions.PlanEntry

// planFields are the fields of a plan entry, and whether each is required.
var planFields = []argField{
	{name: "key", required: true}, {name: "to"}, {name: "title", required: true},
	{name: "body", required: true}, {name: "after"}, {name: "priority"}, {name: "paths"},
}

func (p *planEntries) decodeArg(raw json.RawMessage, _ WaitBounds) string {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Sprintf("must be an array of steps, each an object {key, to?, title, body, after?, priority?, paths?}; got %s", describe(raw))
	}
	switch {
	case len(items) == 0:
		return "must hold at least one step"
	case len(items) > actions.MaxPlan:
		return fmt.Sprintf("holds %d steps; at most %d: post the plan in parts, the later ones naming the earlier ones' ids in after", len(items), actions.MaxPlan)
	}
	out := make([]actions.PlanEntry, len(items))
	for i, item := range items {
		if problem := decodePlanEntry(item, &out[i]); problem != "" {
			return fmt.Sprintf("entry #%d: %s", i+1, problem)
		}
	}
	*p = out
	return ""
}

func (*planEntries) want() string { return "an array of steps" }

// decodePlanEntry decodes one step into e, or says what is wrong with it.
func decodePlanEntry(raw json.RawMessage, e *actions.PlanEntry) string {
	raw = bytes.TrimSpace(raw)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return "must be an object {key, to?, title, body, after?, priority?, paths?}; got " + describe(raw)
	}
	names := make([]string, len(planFields))
	for i, f := range planFields {
		names[i] = f.name
	}
	var unknown []string
	for name := range obj {
		if !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Sprintf("unknown field %s; a step has %s", unknown[0], strings.Join(names, ", "))
	}
	strs := map[string]*string{"key": &e.Key, "to": &e.To, "title": &e.Title, "body": &e.Body}
	for _, f := range planFields {
		val := bytes.TrimSpace(obj[f.name])
		if len(val) == 0 || isNull(val) {
			if f.required {
				return fmt.Sprintf("%s is required", f.name)
			}
			continue
		}
		switch f.name {
		case "after":
			if json.Unmarshal(val, &e.After) != nil {
				return "after must be an array of strings (keys of this plan's steps, or action ids) or null; got " + describe(val)
			}
		case "paths":
			var p pathPatterns
			if problem := p.decodeArg(val, WaitBounds{}); problem != "" {
				return "paths " + problem
			}
			e.Paths = p
		case "priority":
			var p priority
			if problem := p.decodeArg(val, WaitBounds{}); problem != "" {
				return "priority " + problem
			}
			e.Priority = p.ptr()
		default:
			if json.Unmarshal(val, strs[f.name]) != nil {
				return fmt.Sprintf("%s must be a string; got %s", f.name, describe(val))
			}
		}
	}
	return ""
}

// planOut is bee_post_plan's answer.
type planOut struct {
	Records []listedRecord    `json:"records" jsonschema:"The plan's actions as posted, in the order the steps were given: open, or blocked until what they wait for is done."`
	IDs     map[string]string `json:"ids" jsonschema:"Each step's key and the id of the action it became."`
	Last    []string          `json:"last" jsonschema:"The ids of the plan's last steps (those no other step waits for): when they have ended, so has the plan."`
	Guidance
}

// postPlan is bee_post_plan.
func (t *tools) postPlan(ctx context.Context, c *toolCall, in planIn) (planOut, error) {
	who, _, err := c.s.current()
	if err != nil {
		return planOut{}, err
	}
	for i := range in.Actions {
		var d actions.Draft
		if err := c.s.withPaths(&d, in.Actions[i].Paths); err != nil {
			return planOut{}, err
		}
		in.Actions[i].Repo = d.Repo
	}
	wctx, cancel := context.WithTimeout(ctx, writeBound)
	defer cancel()
	posted, err := c.s.source.PostPlan(wctx, actions.Agent(who), in.Actions)
	if err != nil {
		return planOut{}, err
	}
	last := lastSteps(in.Actions, posted.IDs)
	postedIDs := make([]string, len(posted.Records))
	for i, r := range posted.Records {
		postedIDs[i] = r.ID
	}
	t.log.Info("plan posted", logkey.Identity, who, logkey.ActionIDs, postedIDs)
	out := planOut{IDs: posted.IDs, Last: last}
	out.Records = boundRecords(posted.Records, func(recs []listedRecord) any {
		o := out
		o.Records = recs
		return o
	})
	ids := strings.Join(last, ", ")
	if cl := clients.FromRequest(c.req); cl.Wakes {
		out.Next = fmt.Sprintf("Posted %d actions; ids maps each key to its action. Each step opens by itself when what it waits for is done, and a step that fails "+
			"or is cancelled cancels the steps behind it. Go on with other work, or end your turn: bee wakes you as each step ends. "+
			"To wait for the whole plan instead, call %s with ids [%s] (the last steps). %s calls a step off.", len(posted.Records), ToolAwait, ids, ToolCancel)
	} else {
		out.Next = fmt.Sprintf("Posted %d actions; ids maps each key to its action. Each step opens by itself when what it waits for is done, and a step that fails "+
			"or is cancelled cancels the steps behind it. bee cannot wake this %s session when a step ends: call %s with ids [%s] (the last steps) "+
			"to hear how the plan ends. %s calls a step off.", len(posted.Records), cl.Title(), ToolAwait, ids, ToolCancel)
	}
	return out, nil
}

// lastSteps returns the ids of the steps of plan that no other step waits
// for, in plan order.
func lastSteps(plan []actions.PlanEntry, ids map[string]string) []string {
	waited := map[string]bool{}
	for _, e := range plan {
		for _, a := range e.After {
			waited[a] = true
		}
	}
	last := []string{}
	for _, e := range plan {
		if id, ok := ids[e.Key]; ok && !waited[e.Key] {
			last = append(last, id)
		}
	}
	return last
}

// planNext says what to do after bee refused a plan or a post with
// prerequisites or a priority, "" for another refusal.
func planNext(tool string, err error) string {
	switch {
	case errors.Is(err, actions.ErrBadPlan):
		return "Nothing was posted. Fix every entry the error names, then call " + tool + " again with the whole plan."
	case errors.Is(err, actions.ErrPrerequisiteEnded):
		return "Nothing was posted: an action it would wait for has failed or was cancelled, so it could never open. " +
			"Read why, then drop that id from after, or post the work again without it."
	case errors.Is(err, actions.ErrUnknownPrerequisite), errors.Is(err, actions.ErrTooManyPrerequisites):
		return "Call " + tool + " again with argument after fixed as the error says: ids of existing actions, exactly as bee returned them."
	case errors.Is(err, actions.ErrBadPriority):
		return fmt.Sprintf("Call %s again with argument priority from %d (most urgent) to %d, or without it.", tool, actions.MinPriority, actions.MaxPriority)
	}
	return ""
}

// planDescription is bee_post_plan's description: when a lead posts a plan
// rather than one action, and how it hears how the plan went (the client's
// note, added per connection, says whether bee can wake it).
func planDescription() string {
	return fmt.Sprintf("Post a plan: several actions that must happen in an order, in one call, all or none. "+
		"Use it instead of %[1]s when the work has several steps and some must wait for others "+
		"(migrate the schema, then update the two services, then run the load test): post the whole plan at once, rather than posting a step, awaiting it and posting the next. "+
		"Each step is {key, to?, title, body, after?, priority?, paths?}: after names the keys of the steps it waits for (in any order), or ids of existing actions. "+
		"A step is blocked, and nobody can take it, until every step it waits for is done; then it opens and wakes whoever it is for. "+
		"A step that fails or is cancelled cancels every step that waits on it, and you hear of each. "+
		"A cycle, an unknown key or id, a duplicate key or more than %[2]d steps refuse the whole plan, naming each culprit; nothing is posted. "+
		"Returns {records, ids, last, next}: ids maps each key to its action's id; last holds the ids of the last steps (those nothing waits for). "+
		"To wait for the plan's end, call %[3]s with the ids in last.", ToolPost, actions.MaxPlan, ToolAwait)
}
