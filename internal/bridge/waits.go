package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/clients"
	"github.com/tractat-us/bee/internal/logkey"
)

// waitIn is bee_wait_action's arguments.
type waitIn struct {
	TimeoutSeconds seconds `json:"timeoutSeconds,omitzero" jsonschema:"How long to wait for an action, in whole seconds."`
	Cursor         string  `json:"cursor,omitempty" jsonschema:"The cursor from your previous bee_wait_action or bee_list_actions answer. Omit it on the first call."`
}

func (in waitIn) timeout(b WaitBounds) time.Duration { return in.TimeoutSeconds.or(b) }

// waitOut is bee_wait_action's answer.
type waitOut struct {
	Records []actions.Record `json:"records" jsonschema:"The action now claimed by you, or none when there is no work."`
	Cursor  actions.Cursor   `json:"cursor" jsonschema:"Where to resume: pass it as cursor next time, as it is."`
	Guidance
	claims []claimRef // what the answer hands over: its _meta
}

func (o waitOut) meta() mcp.Meta {
	if len(o.claims) == 0 {
		return nil
	}
	// Marks the claims this answer hands over, so that if it is never
	// delivered exactly these go back, and nothing a list showed.
	return mcp.Meta{claimsMetaKey: o.claims}
}

// claimsMetaKey names, in a wait answer's _meta, the claims it hands over.
const claimsMetaKey = "bee/claims"

// A claimRef is one claim a wait answer hands over.
type claimRef struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
}

// wait is bee_wait_action. Waits on one connection run side by side (the
// subagents of a session share it, and nothing tells their calls apart):
// each claims an action of its own, and none ends another.
func (t *tools) wait(ctx context.Context, c *toolCall, in waitIn) (waitOut, error) {
	s := c.s
	who, idCtx, err := s.current()
	if err != nil {
		return waitOut{}, err
	}
	w := s.beginWait()
	defer w.end()
	who, idCtx, page, err := t.next(ctx, c, who, idCtx, actions.Cursor(in.Cursor))
	switch {
	case ctx.Err() != nil:
		// Cancelled: nobody will read the answer, so give back anything
		// claimed at the last moment.
		if err == nil {
			s.giveBack(page.Records)
		}
		t.log.Debug("wait cancelled", logkey.Identity, who)
		return waitOut{}, ctx.Err()
	case idCtx.Err() != nil:
		// Retired or departed while waiting: what was claimed for the old
		// identity has gone back (or goes back now); the model must not
		// believe it holds it.
		if err == nil {
			s.giveBack(page.Records)
		}
		return waitOut{}, s.endedWhileWaiting(who)
	case err != nil:
		return waitOut{}, err
	}
	out := waitOut{Records: page.Records, Cursor: page.Cursor}
	if len(page.Records) == 0 {
		out.Next = emptyWaitNext
		if cl := clients.FromRequest(c.req); !cl.Wakes {
			out.Next = cl.EmptyWaitNext()
		}
		return out, nil
	}
	for _, r := range page.Records {
		t.log.Info("action claimed", logkey.Identity, who, logkey.ActionID, r.ID)
		out.claims = append(out.claims, claimRef{ID: r.ID, Holder: r.Holder})
	}
	s.delivered(w, page.Records)
	out.Next = fmt.Sprintf("You hold action %s now: do it, then call %s with its id and a short result. "+
		"If someone else could do it, call %s; if it cannot be done as asked, call %s with the reason.",
		page.Records[0].ID, ToolFinish, ToolRelease, ToolFail)
	return out, nil
}

// next is the heart of a wait, as who (whose retire ends idCtx) within
// ctx: a claim a wake made for who first (the woken model's call returns
// it at once), else the source's Next. A claim Next returns that the board
// no longer shows held by who (this bridge was stopped past its lease, and
// another took and maybe finished it) is not handed over: the wait goes
// on. When the source says who has departed though the session never
// departed it, the session carries on under a new identity and the wait
// goes on as that one. It returns the identity it waited as and the
// context that ends when that identity is retired.
func (t *tools) next(ctx context.Context, c *toolCall, who identity.ID, idCtx context.Context, cursor actions.Cursor) (identity.ID, context.Context, actions.Page, error) {
	s := c.s
	replaced := false
	for {
		if rec, ok := s.takeHandover(ctx, who); ok {
			return who, idCtx, actions.Page{Records: []actions.Record{rec}, Cursor: cursor}, nil
		}
		nctx, cancel := context.WithCancel(ctx)
		stopRetireWatch := context.AfterFunc(idCtx, cancel)
		// What the session's setup took counts against the bound.
		timeout := max(time.Until(c.deadline), time.Millisecond)
		stopProgress := t.startProgress(nctx, c.req, c.deadline)
		page, err := s.source.Next(nctx, who, cursor, timeout)
		stopProgress()
		stopRetireWatch()
		cancel()
		live := ctx.Err() == nil && idCtx.Err() == nil
		switch {
		case err == nil && live && len(page.Records) > 0:
			page.Records = s.stillHeld(ctx, who, page.Records)
			if len(page.Records) == 0 && time.Until(c.deadline) > 0 {
				cursor = page.Cursor
				continue
			}
		case !replaced && live && errors.Is(err, actions.ErrDeparted):
			if _, rerr := s.replaceDeparted(ctx, who); rerr == nil {
				var cerr error
				if who, idCtx, cerr = s.current(); cerr != nil {
					return who, idCtx, actions.Page{}, cerr
				}
				replaced = true
				continue
			}
		}
		return who, idCtx, page, err
	}
}

// stillHeld returns the records of recs the board still shows claimed by
// who, never nil. A claim the board shows otherwise was lost between the
// claim and now (this process was stopped past its lease); a board that
// cannot be asked keeps the claim, which most likely holds.
func (s *Session) stillHeld(ctx context.Context, who identity.ID, recs []actions.Record) []actions.Record {
	kept := []actions.Record{}
	for _, r := range recs {
		got, err := s.source.Get(ctx, r.ID)
		if err == nil && (got.State != actions.Claimed || got.Holder != string(who)) {
			s.log.Warn("claim lost before it was handed over (this bridge was stopped past its lease?); not handed over",
				logkey.Identity, who, logkey.ActionID, r.ID, logkey.State, got.State, logkey.Holder, got.Holder)
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// startProgress sends a progress notification every interval while a wait
// runs, when the call carries a progress token. The returned stop func
// returns only after the sender goroutine has ended, so no notification
// can follow the call's result.
func (t *tools) startProgress(ctx context.Context, req *mcp.CallToolRequest, deadline time.Time) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	total := deadline.Sub(start).Seconds()
	wg.Go(func() {
		tick := time.NewTicker(t.progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				// Judge the quiet stretch by the clock now, not by when the
				// tick fired: a late tick must not land next to the result.
				if time.Until(deadline) < progressQuiet {
					return
				}
				elapsed := time.Since(start).Seconds()
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      elapsed,
					Total:         total,
					Message:       fmt.Sprintf("waiting (%.0f of %.0f s)", elapsed, total),
				})
				if err != nil {
					t.log.Debug("progress not sent", logkey.Err, err)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// awaitIn is bee_await_action's arguments.
type awaitIn struct {
	IDs            actionIDs `json:"ids" jsonschema:"The ids of the actions to wait for, exactly as bee_post_action returned them."`
	TimeoutSeconds seconds   `json:"timeoutSeconds,omitzero" jsonschema:"How long to wait, in whole seconds."`
}

func (in awaitIn) timeout(b WaitBounds) time.Duration { return in.TimeoutSeconds.or(b) }

// awaitOut is bee_await_action's answer.
type awaitOut struct {
	Records []actions.Record `json:"records" jsonschema:"The actions that have ended, or none when none ended in time."`
	Guidance
}

// await is bee_await_action.
func (t *tools) await(ctx context.Context, c *toolCall, in awaitIn) (awaitOut, error) {
	who, _, err := c.s.current()
	if err != nil {
		return awaitOut{}, err
	}
	// While the model awaits, the waiter is silent: the await itself
	// returns the outcome, and nothing should be told twice.
	defer c.s.beginWait().end()
	timeout := max(time.Until(c.deadline), time.Millisecond)
	stopProgress := t.startProgress(ctx, c.req, c.deadline)
	recs, err := c.s.source.Await(ctx, actions.Agent(who), in.IDs, timeout)
	stopProgress()
	if err != nil {
		return awaitOut{}, err
	}
	out := awaitOut{Records: recs}
	if len(recs) == 0 {
		out.Next = fmt.Sprintf("None of them ended within %.0f s. Call %s again, or end your turn: bee wakes you when one ends.", timeout.Seconds(), ToolAwait)
		if cl := clients.FromRequest(c.req); !cl.Wakes {
			out.Next = cl.EmptyAwaitNext(int(timeout.Round(time.Second) / time.Second))
		}
	} else {
		out.Next = "Read how each ended (state, result, reason). A failed one says why it could not be done: fix what it names and post again, " +
			"do it yourself, or tell the user; do not post the same action again unchanged."
	}
	return out, nil
}
