package board

import (
	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/engine"
)

// warmQueries are the statements that a woken waiter's claim and the end
// of what it claimed (a finish, a failure) run on the write connection,
// besides those its first look and its joining prepared already: built
// by the same functions as the statements themselves.
func warmQueries() []string {
	qs := []string{takeOldest, copyEndedSQL, deleteEndedSQL, dependentsSQL, waitingEdges}
	for _, st := range []actions.State{actions.Done, actions.Failed} {
		q, _ := updateSQL(engine.Update{State: st, Told: engine.ToldIfPerson}, true, 0)
		qs = append(qs, q)
	}
	q, _, _ := dropSQL(engine.Drop{Actions: []int64{0}})
	return append(qs, q)
}

// warm prepares warmQueries on the write connection (see
// engine.Config.Warm): parsing them costs a woken waiter's first claim
// and first finish about two milliseconds each, on the path from a post
// to its claim, and the next post's (issue 22: the first round of a
// fan-out to 32 waiters, each a process of its own, was 4 times slower
// than the rounds after). A statement that fails to prepare is left to
// its first use, which reports the error.
func (b *Board) warm() {
	if b.readOnly != nil {
		return
	}
	ctx := quiet(b.ctx)
	for _, q := range warmQueries() {
		if b.ctx.Err() != nil {
			return
		}
		_, _ = b.wstmts.get(ctx, q)
	}
}
