package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// Plans on the command line: `bee post --after a-1,a-2 --priority 1`, and
// `bee post --plan FILE` for several actions at once.

// maxPlanFile bounds what `bee post --plan` reads: a plan of MaxPlan
// entries, each with a body of MaxBodyLen, and room for the rest.
const maxPlanFile = actions.MaxPlan * (actions.MaxBodyLen + 4<<10)

// planFlags adds --after, --priority and --plan to `bee post`.
func (c *PostCommand) planFlags(fs *flag.FlagSet) {
	fs.Var(&c.after, "after", "ids of actions it waits for, comma-separated (a-1,a-2): it is blocked until every one is done")
	fs.Var(&c.priority, "priority", "0 (most urgent) to 4 (default 2)")
	fs.StringVar(&c.plan, "plan", "", "post the plan in `FILE` (- for stdin): a JSON array of steps {key, to?, title, body?, after?, priority?, paths?}")
}

// An idList is a flag of comma-separated action ids; given twice, the
// lists add up.
type idList []string

func (l *idList) String() string { return strings.Join(*l, ",") }

func (l *idList) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return errors.New("an empty id in the list; give ids separated by commas, such as a-1,a-2")
		}
		*l = append(*l, item)
	}
	return nil
}

// An intFlag is an integer flag that knows whether it was given.
type intFlag struct {
	n   int
	set bool
}

func (f *intFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.n)
}

func (f *intFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	f.n, f.set = n, true
	return nil
}

// ptr is the flag's value, nil when it was not given.
func (f intFlag) ptr() *int {
	if !f.set {
		return nil
	}
	return &f.n
}

// postPlan is `bee post --plan FILE`: it reads the plan, posts it as a
// whole and prints each key and the id it became.
func (c *PostCommand) postPlan(ctx context.Context, pos []string) error {
	const hint = "bee post --plan plan.json (see bee post --help for the file's form)"
	switch {
	case len(pos) > 0:
		return usagef(hint, "bee post: --plan takes no title or body (each step has its own); got %d arguments", len(pos))
	case c.to != "" || len(c.after) > 0 || c.priority.set || c.paths != "":
		return usagef(hint, "bee post: --to, --after, --priority and --paths go in the plan's steps, not beside --plan")
	}
	plan, err := c.readPlan()
	if err != nil {
		return err
	}
	if err := c.planRepo(plan); err != nil {
		return err
	}
	poster, err := c.poster()
	if err != nil {
		return err
	}
	b, err := c.env.open("post", true)
	if err != nil {
		return err
	}
	defer b.Close()
	posted, err := b.PostPlan(ctx, poster, plan)
	if pe, ok := errors.AsType[*actions.PlanError](err); ok {
		return planRefused(pe)
	}
	if err != nil {
		return c.env.refusal(ctx, b, "post", "", err)
	}
	out := c.env.main.Stdout
	if c.asJSON {
		return writeJSON(out, posted)
	}
	fmt.Fprintf(out, "posted a plan of %d actions on %s:\n", len(posted.Records), b.Location())
	tw := newTable(out)
	fmt.Fprintln(tw, "KEY\tID\tSTATE\tFOR\tTITLE")
	for i, r := range posted.Records {
		state := safe(string(r.State))
		if r.State == actions.Blocked {
			state += " (after " + safe(strings.Join(r.BlockedBy, ", ")) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", safe(plan[i].Key), safe(r.ID), state, recipient(r.To), oneLine(r.Title, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(posted.Records) > 0 {
		_, err = fmt.Fprintf(out, "bee plan %s shows it as it goes; bee wait %s waits for its end.\n",
			safe(posted.Records[0].ID), safe(strings.Join(lastSteps(plan, posted.IDs), " ")))
	}
	return err
}

// planRepo names the repository of the steps of plan that carry paths
// without one: --repo's, or the one bee runs in.
func (c *PostCommand) planRepo(plan []actions.PlanEntry) error {
	var name string
	for i := range plan {
		if len(plan[i].Paths) == 0 || plan[i].Repo != "" {
			continue
		}
		if name == "" {
			var err error
			if name, err = c.env.repoName("post", c.repo); err != nil {
				return err
			}
		}
		plan[i].Repo = name
	}
	return nil
}

// lastSteps returns the ids of the steps of plan that no other step waits
// for, in plan order: when they have ended, so has the plan.
func lastSteps(plan []actions.PlanEntry, ids map[string]string) []string {
	waited := map[string]bool{}
	for _, e := range plan {
		for _, a := range e.After {
			waited[a] = true
		}
	}
	var last []string
	for _, e := range plan {
		if id, ok := ids[e.Key]; ok && !waited[e.Key] {
			last = append(last, id)
		}
	}
	return last
}

// readPlan reads the plan --plan names: a JSON array of steps, each with
// only the fields of an actions.PlanEntry.
func (c *PostCommand) readPlan() ([]actions.PlanEntry, error) {
	from := c.plan
	var r io.Reader
	if from == "-" {
		r, from = c.env.main.Stdin, "stdin"
	} else {
		f, err := os.Open(c.plan)
		if err != nil {
			return nil, &cliError{code: exitUsage, err: err, msg: fmt.Sprintf("bee post: cannot read the plan: %v", err),
				hint: "name a JSON file of the plan's steps, or - to read them from stdin"}
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxPlanFile+1))
	if err != nil {
		return nil, fmt.Errorf("bee post: read the plan from %s: %w", from, err)
	}
	if len(raw) > maxPlanFile {
		return nil, usagef("post the plan in parts, the later ones naming the earlier ones' ids in after",
			"bee post: the plan in %s is more than %d MiB, more than %d steps with the longest bodies could take", from, maxPlanFile>>20, actions.MaxPlan)
	}
	var plan []actions.PlanEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err = dec.Decode(&plan)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		return nil, usagef(`a JSON array of steps: [{"key": "a", "title": "First"}, {"key": "b", "title": "Then", "after": ["a"]}]`,
			"bee post: the plan in %s is not a JSON array of steps: %s", from, planJSONError(raw, err))
	}
	return plan, nil
}

// planJSONError says where a plan's JSON went wrong, by line, for a
// person.
func planJSONError(raw []byte, err error) string {
	var off int64 = -1
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		off = se.Offset
	} else if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		off = te.Offset
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if off < 0 || off > int64(len(raw)) {
		return msg
	}
	line := 1 + bytes.Count(raw[:off], []byte("\n"))
	return fmt.Sprintf("line %d: %s", line, msg)
}

// planRefused says why the board refused a plan: every problem, one line
// each. A problem of the board's state (an unknown id, a prerequisite that
// failed or was cancelled) is the board saying no (exit 1); else the plan
// itself is wrong (exit 2).
func planRefused(pe *actions.PlanError) error {
	n := len(pe.Problems) + pe.Omitted
	e := &cliError{code: exitUsage, err: pe,
		msg:  fmt.Sprintf("bee post: the plan was refused, nothing was posted (%d %s):", n, plural(n, "problem", "problems")),
		hint: "fix each entry named, then post the whole plan again"}
	if errors.Is(pe, actions.ErrUnknownAction) || errors.Is(pe, actions.ErrPrerequisiteEnded) {
		e.code = exitNo
	}
	for _, p := range pe.Problems {
		e.detail = append(e.detail, problemText(p))
	}
	if pe.Omitted > 0 {
		e.detail = append(e.detail, fmt.Sprintf("and %d more", pe.Omitted))
	}
	return e
}

// problemText says one problem of a refused plan, naming its entry as
// PlanProblem does, without the sentinels' names (see plainBoardText),
// unless the sentinel is all there is to say ("action title is empty").
func problemText(p actions.PlanProblem) string {
	msg := plainBoardText(p.Err.Error())
	switch {
	case p.Index < 0:
		return msg
	case p.Key == "":
		return fmt.Sprintf("entry #%d: %s", p.Index+1, msg)
	}
	return fmt.Sprintf("entry #%d (key %s): %s", p.Index+1, strconv.Quote(p.Key), msg)
}

// plural is one for 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
