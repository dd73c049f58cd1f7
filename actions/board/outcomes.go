package board

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// noSkip is the skip list that skips nothing.
const noSkip = "[]"

var _ actions.Board = (*Board)(nil)

// Location implements actions.Board: the database file's absolute path.
func (b *Board) Location() string { return b.path }

// endedErr says, for op on an action that has ended, how it ended.
func endedErr(op string, r actions.Record) error {
	switch r.State {
	case actions.Failed:
		return fmt.Errorf("%s: action %s failed (%s: %s): %w", op, r.ID, r.EndedBy, r.Reason, actions.ErrEnded)
	case actions.Cancelled:
		why := ""
		if r.Reason != "" {
			why = ": " + r.Reason
		}
		return fmt.Errorf("%s: action %s was cancelled by %s%s; stop working on it: %w", op, r.ID, r.EndedBy, why, actions.ErrEnded)
	default:
		return fmt.Errorf("%s: action %s was finished by %s: %w", op, r.ID, r.EndedBy, actions.ErrEnded)
	}
}

// mayManage reports whether who may cancel or re-address an action posted
// by from: a person may manage any action, an agent those posted by any
// identity of the same agent (its earlier identities, before a /clear,
// included).
func mayManage(who identity.ID, from string) bool {
	if strings.HasPrefix(string(who), UserPrefix) {
		return true
	}
	return identity.IsID(from) && identity.ID(from).Agent() == who.Agent()
}

// Cancel implements actions.Source: an open or claimed action becomes
// cancelled, with an optional reason, and its holder's next finish is
// refused with that reason. who is a person or an identity of the agent
// that posted it (actions.ErrNotPoster otherwise). A poster that cancels
// its own action has heard of it already; anyone else's cancel wakes the
// poster's waiter.
func (b *Board) Cancel(ctx context.Context, by actions.Poster, id, reason string) (actions.Record, error) {
	who := identity.ID(by)
	if err := actions.CheckPoster(who); err != nil {
		return actions.Record{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	if err := actions.CheckText("reason", reason, MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	rec, err := b.manage(ctx, "cancel", who, id, func(t wtx, cur actions.Record) (actions.Record, error) {
		now := b.nowMS()
		var told any
		if cur.From == string(who) || strings.HasPrefix(cur.From, UserPrefix) {
			told = now
		}
		return scanRecord(t.row(`UPDATE actions SET state = 'cancelled', reason = ?, ended_by = ?, done_at = ?, told_at = ?,
			rev = `+nextRev+` WHERE seq = ? RETURNING `+recordCols, reason, string(who), now, told, cur.Seq))
	})
	if err != nil {
		return actions.Record{}, err
	}
	b.notify.touch(evEnded, wakeup.ForPoster(rec.From))
	b.log.Info("action cancelled", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Holder, rec.Holder)
	return rec, nil
}

// Readdress implements actions.Board: an open action goes to to ("", an
// agent name or a live identity), and the waiters that may now take it wake,
// in every process.
// who is a person or an identity of the poster's agent.
func (b *Board) Readdress(ctx context.Context, by actions.Poster, id, to string) (actions.Record, error) {
	who := identity.ID(by)
	if err := actions.CheckPoster(who); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", id, err)
	}
	if err := actions.CheckRecipient(to); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", id, err)
	}
	if err := b.checkLive(ctx, to); err != nil {
		return actions.Record{}, fmt.Errorf("readdress %s: %w", id, err)
	}
	rec, err := b.manage(ctx, "readdress", who, id, func(t wtx, cur actions.Record) (actions.Record, error) {
		if cur.State == actions.Claimed {
			return actions.Record{}, fmt.Errorf("readdress: action %s is held by %s; it can be re-addressed once it is released (or cancel it): %w",
				id, cur.Holder, actions.ErrNotOpen)
		}
		return scanRecord(t.row(`UPDATE actions SET to_whom = ?, rev = `+nextRev+` WHERE seq = ? RETURNING `+recordCols, to, cur.Seq))
	})
	if err != nil {
		return actions.Record{}, err
	}
	b.notify.touch(evClaimable, wakeup.ForRecipient(rec.To))
	b.log.Info("action re-addressed", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.To, rec.To)
	return rec, nil
}

// manage runs op (cancel, readdress) on an action that who may manage: in
// one write transaction it reads the action, refuses an unknown or ended
// one and one who may not manage (see mayManage), then lets change change
// it. Its errors name op and the action.
func (b *Board) manage(ctx context.Context, op string, who identity.ID, id string,
	change func(t wtx, cur actions.Record) (actions.Record, error)) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
	}
	var rec actions.Record
	err := b.write(ctx, op, func(t wtx) error {
		cur, err := scanRecord(t.row(`SELECT `+recordCols+` FROM actions WHERE seq = ?`, seq))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
		case err != nil:
			return err
		case cur.State.Ended():
			return endedErr(op, cur)
		case !mayManage(who, cur.From):
			return fmt.Errorf("%s: action %s was posted by %s; only a person or an identity of its agent may %s it: %w",
				op, id, cur.From, op, actions.ErrNotPoster)
		}
		rec, err = change(t, cur)
		return err
	})
	if err != nil {
		if isSentinel(err) {
			return actions.Record{}, err
		}
		return actions.Record{}, fmt.Errorf("%s %s: %w", op, id, err)
	}
	return rec, nil
}

// liveMember is what the board knows of a member to judge whether it lives.
type liveMember struct {
	id       string
	departed bool
	pid      int
	lease    int64
}

// live reports whether m speaks for a running bridge: not departed, and its
// process runs (or, when the process cannot be seen, its lease has not run
// out).
func (m liveMember) live(now int64) bool {
	if m.departed {
		return false
	}
	if m.pid > 0 {
		return processAlive(m.pid)
	}
	return m.lease > now
}

// checkLive refuses to as a recipient when it is an identity that is not
// live: nobody could ever claim what is addressed to it. The error names
// the agent's live identities, or suggests its name.
func (b *Board) checkLive(ctx context.Context, to string) error {
	if !identity.IsID(to) {
		return nil
	}
	agent := identity.ID(to).Agent()
	var (
		found bool
		self  liveMember
		alive []string
	)
	err := b.read(ctx, "look up "+to, func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT identity, departed_at IS NOT NULL, pid, lease_until FROM members WHERE agent = ? ORDER BY joined_at`, agent)
		if err != nil {
			return err
		}
		defer rows.Close()
		now := b.nowMS()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.pid, &m.lease); err != nil {
				return err
			}
			if m.id == to {
				found, self = true, m
			}
			if m.live(now) {
				alive = append(alive, m.id)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	if found && self.live(b.nowMS()) {
		return nil
	}
	return actions.NotLiveErr(to, found, self.departed, alive)
}

// reap departs the members whose bridge process has died without a word
// (SIGKILL, a crash): their claims go back to open and what was addressed
// to them goes to their agent name at once, instead of when a lease runs
// out. Every view calls it first, so a dead holder never shows as holding.
// It writes only when it finds one; a failure is logged and left to the
// next look or the lease.
func (b *Board) reap(ctx context.Context) {
	var dead []identity.ID
	err := b.read(ctx, "look for dead members", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT identity, pid FROM members WHERE departed_at IS NULL AND pid > 0`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var pid int
			if err := rows.Scan(&id, &pid); err != nil {
				return err
			}
			if !processAlive(pid) && identity.IsID(id) {
				dead = append(dead, identity.ID(id))
			}
		}
		return rows.Err()
	})
	if err != nil || len(dead) == 0 {
		return
	}
	var released, readdressed []string
	err = b.write(ctx, "depart dead members", func(t wtx) error {
		released, readdressed = nil, nil
		now := b.nowMS()
		for _, who := range dead {
			// Look again under the lock: it may have departed meanwhile.
			var pid int
			err := t.row(`SELECT pid FROM members WHERE identity = ? AND departed_at IS NULL`, string(who)).Scan(&pid)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && processAlive(pid)) {
				continue
			}
			if err != nil {
				return err
			}
			rel, re, err := departTx(t, who, now)
			if err != nil {
				return err
			}
			released, readdressed = append(released, rel...), append(readdressed, re...)
		}
		return nil
	})
	if err != nil {
		b.log.Warn("cannot depart members whose process died; their leases will", logkey.Err, err)
		return
	}
	if len(released) > 0 || len(readdressed) > 0 {
		b.notify.touch(evClaimable, wakeup.Everyone)
	}
	b.log.Info("members departed: their processes died", "identities", dead, "released", released, "readdressed", readdressed)
}

// SetWaiter implements actions.Source: it records on who's member row
// whether its session's waiter is armed.
func (b *Board) SetWaiter(ctx context.Context, who identity.ID, armed bool) error {
	var at any
	if armed {
		at = b.nowMS()
	}
	err := b.write(ctx, "set waiter", func(t wtx) error {
		_, err := t.exec(`UPDATE members SET waiter_at = ? WHERE identity = ? AND departed_at IS NULL`, at, string(who))
		return err
	})
	if err != nil {
		return fmt.Errorf("set waiter of %s: %w", who, err)
	}
	return nil
}

// seqsJSON turns action ids into a JSON array of their seqs, refusing an id
// that no board makes.
func seqsJSON(ids []string) (string, []int64, error) {
	seqs := make([]int64, 0, len(ids))
	for _, id := range ids {
		seq, ok := position.ParseActionID(id)
		if !ok {
			return "", nil, fmt.Errorf("action %q: %w", id, actions.ErrUnknownAction)
		}
		seqs = append(seqs, seq)
	}
	data, err := json.Marshal(seqs)
	return string(data), seqs, err
}

// Await implements actions.Source. It returns the ended actions among ids
// as soon as there is one, waking when an action ends in any process, and
// marks told those that who posted. An id that names no action is
// actions.ErrUnknownAction before any wait.
func (b *Board) Await(ctx context.Context, by actions.Poster, ids []string, timeout time.Duration) ([]actions.Record, error) {
	who := identity.ID(by)
	if len(ids) == 0 {
		return nil, errors.New("await: no action ids given")
	}
	list, seqs, err := seqsJSON(ids)
	if err != nil {
		return nil, fmt.Errorf("await: %w", err)
	}
	var known int
	err = b.read(ctx, "await", func(ctx context.Context) error {
		return b.row(ctx, `SELECT count(*) FROM actions WHERE seq IN (SELECT value FROM json_each(?))`, list).Scan(&known)
	})
	if err != nil {
		return nil, fmt.Errorf("await: %w", err)
	}
	if known < len(uniq(seqs)) {
		for _, id := range ids {
			if _, err := b.Get(ctx, id); errors.Is(err, actions.ErrUnknownAction) {
				return nil, fmt.Errorf("await: %w", err)
			}
		}
	}
	w := b.waiter()
	w.BeforeSleep = b.opts.beforeSleep
	recs, found, err := wakeup.Wait(ctx, w, "await", timeout, func() <-chan struct{} { return b.notify.endedCh("", true) },
		func(ctx context.Context) ([]actions.Record, bool, time.Duration, error) {
			recs, err := b.ended(ctx, list)
			return recs, len(recs) > 0, 0, err
		})
	if err != nil {
		return nil, err
	}
	if !found {
		return []actions.Record{}, nil
	}
	b.markTold(ctx, who, recs)
	return recs, nil
}

// ended is one look of Await: the ended actions among the seqs in list (a
// JSON array), once the dead members have departed.
func (b *Board) ended(ctx context.Context, list string) ([]actions.Record, error) {
	b.reap(ctx)
	var recs []actions.Record
	err := b.read(ctx, "await", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT `+recordCols+` FROM actions WHERE seq IN (SELECT value FROM json_each(?))
			AND state IN ('done', 'failed', 'cancelled') ORDER BY seq`, list)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRecord(rows)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		return rows.Err()
	})
	return recs, err
}

func uniq(seqs []int64) map[int64]bool {
	m := make(map[int64]bool, len(seqs))
	for _, s := range seqs {
		m[s] = true
	}
	return m
}

// markTold records that who has heard the outcomes of the records it
// posted. A failure is logged: the poster's waiter may then wake for an
// outcome it has already seen, which is harmless.
func (b *Board) markTold(ctx context.Context, who identity.ID, recs []actions.Record) {
	var seqs []int64
	for _, r := range recs {
		if r.From == string(who) {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) == 0 {
		return
	}
	data, _ := json.Marshal(seqs)
	err := b.write(context.WithoutCancel(ctx), "mark told", func(t wtx) error {
		_, err := t.exec(`UPDATE actions SET told_at = ? WHERE told_at IS NULL AND seq IN (SELECT value FROM json_each(?))`, b.nowMS(), string(data))
		return err
	})
	if err != nil {
		b.log.Warn("cannot record that the poster heard", logkey.Identity, string(who), logkey.Err, err)
	}
}

// untold finds the oldest ended action whose outcome who should hear and
// nobody has been told of: posted by who, or by a departed identity of
// who's agent.
const untold = `SELECT seq FROM actions WHERE told_at IS NULL AND state IN ('done', 'failed', 'cancelled')
	AND (from_whom = ?1 OR (substr(from_whom, 1, length(?2)) = ?2
		AND from_whom IN (SELECT identity FROM members WHERE departed_at IS NOT NULL)))
	ORDER BY rev LIMIT 1`

// takeOutcome marks told, and returns, an outcome who should hear. It reads
// first, so that idle looks do not take the write lock.
func (b *Board) takeOutcome(ctx context.Context, who identity.ID) (actions.Record, bool, error) {
	prefix := identity.Prefix + who.Agent() + "#"
	var seq int64
	err := b.read(ctx, "look for outcomes", func(ctx context.Context) error {
		return b.row(ctx, untold, string(who), prefix).Scan(&seq)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return actions.Record{}, false, nil
	}
	if err != nil {
		return actions.Record{}, false, err
	}
	var rec actions.Record
	found := false
	err = b.write(ctx, "tell outcome", func(t wtx) error {
		var err error
		// untold numbers its parameters: ?1 who, ?2 prefix.
		rec, err = scanRecord(t.row(`UPDATE actions SET told_at = ?3 WHERE seq = (`+untold+`) RETURNING `+recordCols,
			string(who), prefix, b.nowMS()))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return actions.Record{}, false, err
	}
	b.log.Info("outcome told", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, true, nil
}

// Notice implements actions.Source. Each look departs members whose
// process died, then looks for an outcome who should hear, then for an
// action who may take that is not in skip, which it claims as Next does
// (leases, reclaiming, and giving the claim back when ctx ends as it
// commits). Between looks it sleeps until a post, release or end in any
// process, a lease running out, or the safety poll.
func (b *Board) Notice(ctx context.Context, who identity.ID, skip []string, timeout time.Duration) (actions.Notice, bool, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Notice{}, false, fmt.Errorf("notice: %w", err)
	}
	skipSeqs := make([]int64, 0, len(skip))
	for _, id := range skip {
		if seq, ok := position.ParseActionID(id); ok {
			skipSeqs = append(skipSeqs, seq)
		}
	}
	data, _ := json.Marshal(skipSeqs)
	skipList := string(data)
	agent := who.Agent()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(err error) (actions.Notice, bool, error) {
		switch {
		case ctx.Err() != nil:
			return actions.Notice{}, false, ctx.Err()
		case b.ctx.Err() != nil:
			return actions.Notice{}, false, b.closed()
		case wctx.Err() != nil:
			return actions.Notice{}, false, nil
		case errors.Is(err, ErrDeparted):
			return actions.Notice{}, false, err
		}
		return actions.Notice{}, false, fmt.Errorf("notice for %s: %w", who, err)
	}
	for {
		wake, ended := b.notify.wakeCh(agent), b.notify.endedCh(agent, false) // before looking
		b.reap(wctx)
		rec, ok, err := b.takeOutcome(wctx, who)
		if err != nil {
			return fail(err)
		}
		if ok {
			return actions.Notice{Kind: actions.NoticeOutcome, Record: rec}, true, nil
		}
		p, err := b.peek(wctx, who, skipList)
		if err != nil {
			return fail(err)
		}
		if p.departed {
			return fail(fmt.Errorf("notice for %s: %w", who, ErrDeparted))
		}
		if p.claimable || (p.expiry != 0 && p.expiry <= b.nowMS()) {
			c, err := b.claim(wctx, who, p, skipList)
			if err != nil {
				return fail(err)
			}
			if c.ok {
				b.markHot(who, c.lease, p.expiry, true)
				b.addHeld(who, 1)
				if ctx.Err() != nil {
					return actions.Notice{}, false, b.giveBack(ctx, who, c.rec)
				}
				return actions.Notice{Kind: actions.NoticeWork, Record: c.rec}, true, nil
			}
			p.expiry = c.leaseEnd
		}
		d := time.Until(deadlineOf(wctx))
		if d <= 0 {
			return actions.Notice{}, false, nil
		}
		b.sleep(wctx, min(d, b.opts.SafetyPoll), p.expiry, wake, ended)
		if wctx.Err() != nil || b.ctx.Err() != nil {
			return fail(wctx.Err())
		}
	}
}

// markGone sets HolderGone on the claimed records whose holder is not live
// (see liveMember.live): a view shows a dead holder as such even when reap
// could not depart it.
func (b *Board) markGone(ctx context.Context, recs []actions.Record) {
	holders := map[string]bool{}
	for _, r := range recs {
		if r.State == actions.Claimed {
			holders[r.Holder] = true
		}
	}
	if len(holders) == 0 {
		return
	}
	list := make([]string, 0, len(holders))
	for h := range holders {
		list = append(list, h)
	}
	data, _ := json.Marshal(list)
	live := map[string]bool{}
	err := b.read(ctx, "look at holders", func(ctx context.Context) error {
		rows, err := b.rows(ctx, `SELECT identity, departed_at IS NOT NULL, pid, lease_until FROM members
			WHERE identity IN (SELECT value FROM json_each(?))`, string(data))
		if err != nil {
			return err
		}
		defer rows.Close()
		now := b.nowMS()
		for rows.Next() {
			var m liveMember
			if err := rows.Scan(&m.id, &m.departed, &m.pid, &m.lease); err != nil {
				return err
			}
			live[m.id] = m.live(now)
		}
		return rows.Err()
	})
	if err != nil {
		return
	}
	for i := range recs {
		if recs[i].State == actions.Claimed && !live[recs[i].Holder] {
			recs[i].HolderGone = true
		}
	}
}
