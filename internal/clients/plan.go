package clients

import "fmt"

// PlanNote ends bee_post_plan's description: how its poster hears how the
// plan's steps ended.
func (c Client) PlanNote() string {
	if c.Wakes {
		return "Then end your turn or go on with other work: bee wakes you as each step ends, or bee_await_action waits for the ids in last."
	}
	return fmt.Sprintf("bee cannot wake a %s session when a step ends: bee_await_action with the ids in last waits for the plan's end "+
		"(call it again after an empty result).", c.Title())
}
