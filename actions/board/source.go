package board

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// recordCols are the columns scanRecord reads, in order.
const recordCols = `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, done_at`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(s scanner, extra ...any) (actions.Record, error) {
	var (
		r                  actions.Record
		state              string
		posted             int64
		claimedAt, endedAt sql.NullInt64
	)
	dest := append([]any{&r.Seq, &r.To, &r.From, &r.Title, &r.Body, &state, &r.Holder, &r.Result, &r.Reason, &r.EndedBy,
		&posted, &claimedAt, &endedAt}, extra...)
	if err := s.Scan(dest...); err != nil {
		return actions.Record{}, err
	}
	r.ID = position.ActionID(r.Seq)
	r.State = actions.State(state)
	r.PostedAt = fromMS(posted)
	if claimedAt.Valid {
		t := fromMS(claimedAt.Int64)
		r.ClaimedAt = &t
	}
	if endedAt.Valid {
		t := fromMS(endedAt.Int64)
		r.EndedAt = &t
	}
	return r, nil
}

// opCtx bounds an operation: it ends at ctx's end, after limit, or when the
// Board closes, whichever comes first.
func (b *Board) opCtx(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(ctx, limit)
	stop := context.AfterFunc(b.ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

// write runs fn in one write transaction (BEGIN IMMEDIATE) on the write
// connection, while holding the write lock. It waits for the locks at most
// BusyTimeout (then ErrLocked) and no longer than ctx allows (then ctx's
// error); once the transaction has begun it runs to its end whatever ctx
// does, so a committed write is never reported as failed. Errors fn
// returns that do not come from the database pass through unchanged.
func (b *Board) write(ctx context.Context, op string, fn func(t wtx) error) (err error) {
	if err := b.closed(); err != nil {
		return err
	}
	wctx, cancel := b.opCtx(ctx, b.opts.BusyTimeout)
	defer cancel()
	release, err := b.lock.acquire(wctx)
	if err != nil {
		return b.waitErr(ctx, op, err)
	}
	err = b.transact(wctx, fn)
	release()
	if err != nil {
		if isDBErr(err) {
			return b.waitErr(ctx, op, err)
		}
		return err
	}
	if b.writes.Add(1)%checkpointEvery == 0 {
		b.checkpoint()
	}
	return nil
}

// transact runs fn between BEGIN IMMEDIATE and COMMIT, or ROLLBACK when
// either fails.
func (b *Board) transact(ctx context.Context, fn func(t wtx) error) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	t := wtx{b: b, ctx: quiet(ctx)}
	err := fn(t)
	if err == nil {
		_, err = b.wconn.ExecContext(t.ctx, "COMMIT")
	}
	if err != nil {
		if _, rerr := b.wconn.ExecContext(t.ctx, "ROLLBACK"); rerr != nil {
			b.log.Error("rollback failed", logkey.Err, rerr)
		}
	}
	return err
}

// checkpointEvery is how many of its writes a Board lets pass between WAL
// checkpoints.
const checkpointEvery = 128

// checkpoint copies the WAL back into the database file. SQLite would do
// this inside a commit, while bee's write lock is held and every writer
// waits (a checkpoint syncs the disk twice); the write connection turns
// that off, and each Board checkpoints every checkpointEvery writes
// instead, outside the lock. A PASSIVE checkpoint does not wait for
// readers or writers; a failed one is retried at the next turn.
func (b *Board) checkpoint() {
	if _, err := b.db.ExecContext(quiet(b.ctx), "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		b.log.Debug("checkpoint failed; retrying later", logkey.Err, err)
	}
}

// begin starts the write transaction. The lock file keeps bee's writers
// apart, so BEGIN nearly always succeeds at once on the write connection,
// whose busy timeout is 0. Only a writer that ignores the lock file (the
// sqlite3 shell, say) makes it fail with SQLITE_BUSY; then begin waits, up
// to the busy timeout and no longer than ctx allows.
func (b *Board) begin(ctx context.Context) error {
	q := quiet(ctx)
	_, err := b.wconn.ExecContext(q, "BEGIN IMMEDIATE")
	if !isBusy(err) {
		return err
	}
	if _, err := b.wconn.ExecContext(q, "PRAGMA busy_timeout = "+strconv.FormatInt(b.opts.BusyTimeout.Milliseconds(), 10)); err != nil {
		return err
	}
	// A context that can end costs a goroutine per statement in the
	// driver; this is the one statement where it is worth it.
	_, err = b.wconn.ExecContext(ctx, "BEGIN IMMEDIATE")
	if err != nil {
		// When ctx ends just as BEGIN succeeds, the driver reports ctx's
		// error with the transaction open (and SQLite's write lock held):
		// make sure it is not.
		_, _ = b.wconn.ExecContext(q, "ROLLBACK")
	}
	if _, perr := b.wconn.ExecContext(q, "PRAGMA busy_timeout = 0"); perr != nil {
		b.log.Error("cannot reset the write connection's busy timeout", logkey.Err, perr)
	}
	return err
}

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// isDBErr reports whether err came from the database or the waits around
// it, rather than from the board's own checks.
func isDBErr(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrTxDone) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, errLockClosed) || isBadScan(err)
}

// waitErr says why an operation on the database failed: the caller's ctx
// ended (its error, unwrapped, so callers can compare it), the Board
// closed, the busy timeout passed, or the database failed.
func (b *Board) waitErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.ctx.Err() != nil || errors.Is(err, errLockClosed) {
		return b.closed()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return b.lockedErr(op, nil)
	}
	return b.dbErr(op, err)
}

// read runs fn, a read, and says why it failed. Reads do not wait for
// writers (WAL), so they need no bound of their own.
func (b *Board) read(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	if err := b.closed(); err != nil {
		return err
	}
	err := fn(ctx)
	if err == nil || errors.Is(err, sql.ErrNoRows) || !isDBErr(err) {
		return err
	}
	return b.waitErr(ctx, op, err)
}

// nextRev is the change number for the rows a write transaction changes:
// above every change before it, since writes are serialized. Wait reports
// changes in (rev, seq) order, so each change is reported once.
const nextRev = `(SELECT coalesce(max(rev), 0) + 1 FROM actions)`

// Post adds an open action from who, which is an identity or a person
// ("user:<name>", see User). to is "" (anyone), an agent name (any identity
// of that agent) or one identity. The title is trimmed; it must then be
// non-empty (actions.ErrEmptyTitle), one line (ErrBadText) and at most
// MaxTitleLen characters (ErrTooLong); the body is at most MaxBodyLen
// bytes. A bad to is ErrBadRecipient, a bad who ErrBadPoster, and an
// identity that is not live actions.ErrNotLive, naming the live identities
// of its agent. Posting wakes the waiters that may take the action, in every
// process.
func (b *Board) Post(ctx context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
	who, to := identity.ID(by), d.To
	title, err := actions.CheckPost(who, to, d.Title, d.Body)
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	if err := b.checkLive(ctx, to); err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	var rec actions.Record
	err = b.write(ctx, "post", func(t wtx) error {
		var err error
		rec, err = scanRecord(t.row(
			`INSERT INTO actions (to_whom, from_whom, title, body, state, posted_at, rev)
			 VALUES (?, ?, ?, ?, 'open', ?, `+nextRev+`) RETURNING `+recordCols,
			to, string(who), title, d.Body, b.nowMS()))
		return err
	})
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	b.notify.touch(evClaimable, wakeup.ForRecipient(rec.To))
	b.log.Info("action posted", logkey.ActionID, rec.ID, logkey.From, rec.From, logkey.To, rec.To)
	return rec, nil
}

// Get implements actions.Source: the action with the given id, or
// actions.ErrUnknownAction. Members whose process died depart first.
func (b *Board) Get(ctx context.Context, id string) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("action %q: %w", id, position.UnknownHint(id))
	}
	b.reap(ctx)
	var rec actions.Record
	err := b.read(ctx, "get "+id, func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(b.row(ctx, `SELECT `+recordCols+` FROM actions WHERE seq = ?`, seq))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return actions.Record{}, fmt.Errorf("action %q: %w", id, actions.ErrUnknownAction)
	}
	if err != nil {
		return actions.Record{}, err
	}
	recs := []actions.Record{rec}
	b.markGone(ctx, recs)
	return recs[0], nil
}

// List implements actions.Source: the actions posted after since, oldest
// first, in every state, at most Options.PageSize of them (and about 1 MiB
// of text), with the cursor to page on from. An empty page's cursor is
// since itself (or the start, for an empty since). Members whose process
// died depart first, and a claim whose holder is gone anyway is marked
// HolderGone.
func (b *Board) List(ctx context.Context, since actions.Cursor) (actions.Page, error) {
	return b.list(ctx, since, nil)
}

// ListFiltered implements actions.Board: List keeping only the actions in
// one of f.States (all, when it is empty), filtered in the database.
func (b *Board) ListFiltered(ctx context.Context, since actions.Cursor, f actions.ListFilter) (actions.Page, error) {
	if err := f.CheckStates(); err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	return b.list(ctx, since, f.States)
}

func (b *Board) list(ctx context.Context, since actions.Cursor, states []actions.State) (actions.Page, error) {
	after, err := b.cursors().ParseSeq(since)
	if err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	query := `SELECT ` + recordCols + ` FROM actions WHERE seq > ? ORDER BY seq LIMIT ?`
	args := []any{after, b.opts.PageSize}
	if len(states) > 0 {
		// One placeholder per state: a handful of statements in the cache.
		query = `SELECT ` + recordCols + ` FROM actions WHERE seq > ? AND state IN (?` + strings.Repeat(", ?", len(states)-1) + `)
			ORDER BY seq LIMIT ?`
		args = []any{after}
		for _, s := range states {
			args = append(args, string(s))
		}
		args = append(args, b.opts.PageSize)
	}
	b.reap(ctx)
	page := actions.Page{Records: []actions.Record{}, Cursor: b.cursors().Seq(after)}
	err = b.read(ctx, "list", func(ctx context.Context) error {
		rows, err := b.rows(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return pages.Fill(&page, rows, func() (actions.Record, actions.Cursor, error) {
			rec, err := scanRecord(rows)
			return rec, b.cursors().Seq(rec.Seq), err
		})
	})
	if err != nil {
		return actions.Page{}, fmt.Errorf("list: %w", err)
	}
	b.markGone(ctx, page.Records)
	return page, nil
}

// Finish implements actions.Source: the action who holds becomes done, with
// result (at most MaxResultLen bytes) kept on it, and its poster's waiters
// wake. It returns actions.ErrUnknownAction, actions.ErrNotHeld (the action
// is open, or held by someone else, whom the error names) or
// actions.ErrEnded (naming who ended it, and why when it was failed or
// cancelled).
func (b *Board) Finish(ctx context.Context, who identity.ID, id, result string) (actions.Record, error) {
	if err := actions.CheckText("result", result, MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("finish %s: %w", id, err)
	}
	return b.end(ctx, "finish", who, id, `state = 'done', result = ?`, result)
}

// Fail implements actions.Source: the action who holds becomes failed, with
// reason (non-empty, at most MaxResultLen bytes) kept on it, and its
// poster's waiters wake. It returns the same errors as Finish, and
// actions.ErrEmptyReason.
func (b *Board) Fail(ctx context.Context, who identity.ID, id, reason string) (actions.Record, error) {
	if strings.TrimSpace(reason) == "" {
		return actions.Record{}, fmt.Errorf("fail %s: %w: say why it could not be done", id, actions.ErrEmptyReason)
	}
	if err := actions.CheckText("reason", reason, MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("fail %s: %w", id, err)
	}
	return b.end(ctx, "fail", who, id, `state = 'failed', reason = ?`, reason)
}

// end ends an action who holds: set says how (its one argument arg), and
// the rest is common to every end.
func (b *Board) end(ctx context.Context, op string, who identity.ID, id, set, arg string) (actions.Record, error) {
	now := b.nowMS()
	rec, err := b.settle(ctx, op, who, id, set+`, ended_by = ?, done_at = ?, told_at = `+toldAtEnd, arg, string(who), now, now)
	if err != nil {
		return actions.Record{}, err
	}
	b.addHeld(who, -1)
	b.notify.touch(evEnded, wakeup.ForPoster(rec.From))
	b.log.Info("action ended", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, nil
}

// toldAtEnd is told_at for an action that ends at ?time: a person's post
// counts as told at once (people are not woken; they ask with bee wait),
// an agent's waits for its poster to hear. It reads the row's from_whom, so
// it works only in an UPDATE of that row, with the time as its last
// argument.
const toldAtEnd = `(CASE WHEN substr(from_whom, 1, 5) = 'user:' THEN ? END)`

// Release implements actions.Source: the action who holds goes back to
// open, at its place in the posting order, and the waiters that may take it
// wake, in every process. It returns the same errors as Finish.
func (b *Board) Release(ctx context.Context, who identity.ID, id string) (actions.Record, error) {
	rec, err := b.settle(ctx, "release", who, id, `state = 'open', holder = '', claimed_at = NULL`)
	if err != nil {
		return actions.Record{}, err
	}
	b.addHeld(who, -1)
	b.notify.touch(evClaimable, wakeup.ForRecipient(rec.To))
	b.log.Info("action released", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return rec, nil
}

// settle changes an action who holds with the SET clause set (its
// arguments args), after checking that who holds it.
func (b *Board) settle(ctx context.Context, op string, who identity.ID, id, set string, args ...any) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
	}
	var rec actions.Record
	err := b.write(ctx, op, func(t wtx) error {
		var err error
		rec, err = scanRecord(t.row(
			`UPDATE actions SET `+set+`, rev = `+nextRev+` WHERE seq = ? AND state = 'claimed' AND holder = ? RETURNING `+recordCols,
			append(args, seq, string(who))...))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Not changed: say why.
		cur, err := scanRecord(t.row(`SELECT `+recordCols+` FROM actions WHERE seq = ?`, seq))
		state, holder := cur.State, cur.Holder
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
		case err != nil:
			return err
		case state.Ended():
			return endedErr(op, cur)
		case actions.State(state) == actions.Open:
			return fmt.Errorf("%s: action %s is open, not held by %s: %w", op, id, who, actions.ErrNotHeld)
		default:
			return fmt.Errorf("%s: action %s is held by %s, not %s: %w", op, id, holder, who, actions.ErrNotHeld)
		}
	})
	if err != nil {
		if isSentinel(err) {
			return actions.Record{}, err
		}
		return actions.Record{}, fmt.Errorf("%s %s: %w", op, id, err)
	}
	return rec, nil
}

// isSentinel reports whether err already says which action and why.
func isSentinel(err error) bool {
	return errors.Is(err, actions.ErrUnknownAction) || errors.Is(err, actions.ErrNotHeld) || errors.Is(err, actions.ErrEnded) ||
		errors.Is(err, actions.ErrNotPoster) || errors.Is(err, actions.ErrNotOpen) || errors.Is(err, actions.ErrNotLive)
}

// earliestLease is the earliest lease end among the holders of claims
// other than ?1: 0 for a holder without a live member row, NULL when nobody
// else holds a claim. It visits each holder once (a loose index scan of
// actions_claimed), not each claim.
const earliestLease = `WITH RECURSIVE h (holder) AS (
		SELECT min(holder) FROM actions WHERE state = 'claimed'
		UNION ALL
		SELECT (SELECT min(holder) FROM actions WHERE state = 'claimed' AND holder > h.holder) FROM h WHERE h.holder IS NOT NULL)
	SELECT min(coalesce(m.lease_until, 0)) FROM h LEFT JOIN members m ON m.identity = h.holder AND m.departed_at IS NULL
	WHERE h.holder IS NOT NULL AND h.holder <> ?1`

// peekResult is what a waiter learns from one read.
type peekResult struct {
	claimable bool  // an open action who may take exists
	expiry    int64 // earliest lease end (ms) among others' claims; 0 when none
	head      int64 // the highest seq posted
	departed  bool  // who has departed
	member    bool  // who has a live member row (joined, not departed)
	lease     int64 // who's lease end (ms), when member
}

// peek looks, without writing, whether a claim attempt could succeed now
// and when a lease will next run out. skip is a JSON array of the seqs not
// to count as claimable (see noSkip).
func (b *Board) peek(ctx context.Context, who identity.ID, skip string) (peekResult, error) {
	var (
		p        peekResult
		expiry   sql.NullInt64
		departed sql.NullBool
		lease    sql.NullInt64
	)
	err := b.read(ctx, "look for actions", func(ctx context.Context) error {
		return b.row(ctx, `SELECT
			EXISTS (SELECT 1 FROM actions WHERE state = 'open' AND to_whom IN ('', ?2, ?1)
				AND seq NOT IN (SELECT value FROM json_each(?3))),
			(`+earliestLease+`),
			(SELECT coalesce(max(seq), 0) FROM actions),
			(SELECT departed_at IS NOT NULL FROM members WHERE identity = ?1),
			(SELECT lease_until FROM members WHERE identity = ?1)`,
			string(who), who.Agent(), skip).Scan(&p.claimable, &expiry, &p.head, &departed, &lease)
	})
	if err != nil {
		return peekResult{}, err
	}
	if expiry.Valid {
		p.expiry = max(expiry.Int64, 1) // 0 means "none"; an unknown holder is already expired
	}
	p.departed = departed.Valid && departed.Bool
	p.member = departed.Valid && !departed.Bool
	p.lease = lease.Int64
	return p, nil
}

// Next implements actions.Source. It waits for the oldest open action who
// may take (addressed to anyone, to who's agent name, or to who), claims it
// for who in one write transaction and returns it. Before claiming it puts
// back to open every claim whose holder's lease has run out.
//
// It returns within timeout: on timeout the page has no records (a non-nil
// empty slice). A non-positive timeout looks once without waiting. A board
// locked for longer than Options.BusyTimeout is ErrLocked. When ctx ends
// first Next returns ctx's error, and when ctx ends just as the claim
// commits, Next gives the claim back before returning ctx's error, so
// nothing is held by a call whose answer nobody received.
//
// The cursor Next returns marks how far the posting order had reached. Next
// checks after (actions.ErrBadCursor for a cursor this board did not make)
// but always offers the oldest claimable action, even one posted before
// after: a released or reclaimed action goes back to its place in the order
// and must not be skipped.
//
// who must be an identity. If it has not joined, Next joins it for this
// process (and renews its lease while it holds a claim, until Depart or
// Close), so that its claims are covered by a lease. If it has departed, Next returns ErrDeparted.
func (b *Board) Next(ctx context.Context, who identity.ID, after actions.Cursor, timeout time.Duration) (actions.Page, error) {
	if _, err := identity.Parse(string(who)); err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	head, err := b.cursors().ParseSeq(after)
	if err != nil {
		return actions.Page{}, fmt.Errorf("next: %w", err)
	}
	once := timeout <= 0
	if once {
		timeout = b.opts.BusyTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n := &nextCall{b: b, ctx: ctx, wctx: wctx, who: who, head: head, once: once}

	if c, err := n.claimHot(); err != nil || c.ok {
		return n.answer(c, err)
	}
	for {
		wake := b.notify.wakeCh(who.Agent()) // before looking, so no wake-up is missed
		c, err := n.lookAndClaim()
		if err != nil || c.ok {
			return n.answer(c, err)
		}
		if !n.rest(c.leaseEnd, wake) {
			return n.timedOut()
		}
		if wctx.Err() != nil || b.ctx.Err() != nil {
			return n.fail(wctx.Err())
		}
	}
}

// A nextCall is one call of Next, which runs in named steps: claimHot,
// then lookAndClaim and rest until a claim, an error or the deadline; its
// answer comes from answer, timedOut or fail.
type nextCall struct {
	b    *Board
	ctx  context.Context // the caller's
	wctx context.Context // ctx bounded by the call's timeout
	who  identity.ID
	head int64 // how far the posting order had reached, for the cursor
	once bool  // look once, without waiting
}

// claimHot claims at once, without looking first, for an identity that
// claimed through this Board a moment ago: it is likely draining a queue.
// Idle waiters look first, so that a post waking them all does not send
// them all to the write lock. For an identity not hot it claims nothing.
func (n *nextCall) claimHot() (claimResult, error) {
	h, ok := n.b.hotLook(n.who)
	if !ok {
		return claimResult{}, nil
	}
	c, err := n.b.claim(n.wctx, n.who, peekResult{member: true, lease: h.lease, expiry: h.expiry}, noSkip)
	if err == nil && c.ok {
		n.b.markHot(n.who, c.lease, h.expiry, false)
	}
	return c, err
}

// lookAndClaim reaps, looks and, when the look found an action who may
// take or a lease run out, claims. When it claims nothing, c.leaseEnd is
// the earliest lease end (ms) among others' claims, 0 when none is known:
// when to look again.
func (n *nextCall) lookAndClaim() (claimResult, error) {
	b := n.b
	b.reap(n.wctx)
	p, err := b.peek(n.wctx, n.who, noSkip)
	if err != nil {
		return claimResult{}, err
	}
	n.head = max(n.head, p.head)
	if p.departed {
		return claimResult{}, fmt.Errorf("next for %s: %w; join it again or use a new identity", n.who, ErrDeparted)
	}
	if !p.claimable && (p.expiry == 0 || p.expiry > b.nowMS()) {
		return claimResult{leaseEnd: p.expiry}, nil
	}
	// When someone else is faster, the claim's transaction has just looked:
	// its leaseEnd is when to look again, and a change since has already
	// closed the caller's wake channel.
	c, err := b.claim(n.wctx, n.who, p, noSkip)
	if err == nil && c.ok {
		b.markHot(n.who, c.lease, p.expiry, true)
	}
	return c, err
}

// rest sleeps after a look that claimed nothing, until wake closes, a lease
// ending at expiry (ms; 0 for none) runs out, the safety poll or the
// deadline passes, or the call or the Board ends. It returns false, without
// sleeping, when the call may not wait (once, or past its deadline).
func (n *nextCall) rest(expiry int64, wake <-chan struct{}) bool {
	d := time.Until(deadlineOf(n.wctx))
	if n.once || d <= 0 {
		return false
	}
	if n.b.opts.beforeSleep != nil {
		n.b.opts.beforeSleep()
	}
	n.b.sleep(n.wctx, min(d, n.b.opts.SafetyPoll), expiry, wake, nil)
	return true
}

// answer is Next's answer to a claim attempt that claimed or failed:
// ErrDeparted as it is, another error through fail, a claim through
// claimed.
func (n *nextCall) answer(c claimResult, err error) (actions.Page, error) {
	switch {
	case errors.Is(err, ErrDeparted):
		return actions.Page{}, err
	case err != nil:
		return n.fail(err)
	}
	return n.claimed(c.rec)
}

// claimed answers with a claim, or gives it back if nobody is left to
// receive it.
func (n *nextCall) claimed(rec actions.Record) (actions.Page, error) {
	n.b.addHeld(n.who, 1)
	if n.b.opts.afterClaim != nil {
		n.b.opts.afterClaim(rec)
	}
	if n.ctx.Err() != nil {
		return actions.Page{}, n.b.giveBack(n.ctx, n.who, rec)
	}
	return actions.Page{Records: []actions.Record{rec}, Cursor: n.b.cursors().Seq(max(n.head, rec.Seq))}, nil
}

// timedOut is the empty page Next returns at its deadline.
func (n *nextCall) timedOut() (actions.Page, error) {
	return actions.Page{Records: []actions.Record{}, Cursor: n.b.cursors().Seq(n.head)}, nil
}

// fail maps an error of an attempt to Next's answer: the caller's context
// ended, the Board closed, the deadline passed (an empty page), or err.
func (n *nextCall) fail(err error) (actions.Page, error) {
	switch {
	case n.ctx.Err() != nil:
		return actions.Page{}, n.ctx.Err()
	case n.b.ctx.Err() != nil:
		return actions.Page{}, n.b.closed()
	case n.wctx.Err() != nil:
		return n.timedOut()
	}
	return actions.Page{}, fmt.Errorf("next for %s: %w", n.who, err)
}

// sleep waits until wake or also closes (also may be nil), d (a real
// duration) passes, a lease ending at expiry (Unix ms on the board's
// clock; 0 for none) runs out, ctx ends or the Board closes.
func (b *Board) sleep(ctx context.Context, d time.Duration, expiry int64, wake, also <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	var leaseEnd <-chan time.Time
	if expiry != 0 {
		lt := b.clock.NewTimer(time.UnixMilli(expiry).Sub(b.clock.Now()) + time.Millisecond)
		defer lt.Stop()
		leaseEnd = lt.C()
	}
	select {
	case <-wake:
	case <-also:
	case <-leaseEnd:
	case <-t.C:
	case <-ctx.Done():
	case <-b.ctx.Done():
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// giveBack releases a claim whose caller has gone away and returns the
// caller's error (joined with the release's, should that fail: then the
// claim stays held until who departs or its lease runs out).
func (b *Board) giveBack(ctx context.Context, who identity.ID, rec actions.Record) error {
	_, err := b.Release(context.WithoutCancel(ctx), who, rec.ID)
	if err != nil {
		b.log.Error("cannot give back a claim nobody received", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Err, err)
		return errors.Join(ctx.Err(), fmt.Errorf("give back %s: %w", rec.ID, err))
	}
	b.log.Info("claim given back: the caller went away", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return ctx.Err()
}

// Claims whose holder is departed, unknown or out of lease (?1 is who,
// ?2 the time).
const expiredClaims = `state = 'claimed' AND holder <> ?1 AND NOT EXISTS (SELECT 1 FROM members m
	WHERE m.identity = actions.holder AND m.departed_at IS NULL AND m.lease_until > ?2)`

// oldestFor is the oldest open action who may take (?1 is who, ?3 its
// agent name), not in ?4, or NULL. Three index walks that stop at their
// first row: "IN (...) ORDER BY seq LIMIT 1" would sort every open action
// instead.
const oldestFor = `SELECT min(s) FROM (
	SELECT (SELECT seq FROM actions WHERE state = 'open' AND to_whom = '' AND seq NOT IN (SELECT value FROM json_each(?4)) ORDER BY seq LIMIT 1) AS s
	UNION ALL SELECT (SELECT seq FROM actions WHERE state = 'open' AND to_whom = ?3 AND seq NOT IN (SELECT value FROM json_each(?4)) ORDER BY seq LIMIT 1)
	UNION ALL SELECT (SELECT seq FROM actions WHERE state = 'open' AND to_whom = ?1 AND seq NOT IN (SELECT value FROM json_each(?4)) ORDER BY seq LIMIT 1))`

// takeOldest claims oldestFor for who (?2 is the time), unless who
// departed meanwhile.
const takeOldest = `UPDATE actions SET state = 'claimed', holder = ?1, claimed_at = ?2, rev = ` + nextRev + `
	WHERE state = 'open' AND seq = (` + oldestFor + `)
	AND EXISTS (SELECT 1 FROM members WHERE identity = ?1 AND departed_at IS NULL)
	RETURNING ` + recordCols

// A claimResult is what one claim attempt did.
type claimResult struct {
	rec actions.Record
	ok  bool // rec was claimed for who
	// leaseEnd, when nothing was claimed, is the earliest lease end (ms)
	// among others' claims, when known (0 when not): when to look again.
	leaseEnd int64
	// lease is who's own lease end (ms), as far as the attempt knows.
	lease int64
	// Said after the commit: who joined by this claim, and the claims
	// reclaimed from holders whose leases had run out.
	joined    bool
	reclaimed []string
	holders   []string
}

// claim reclaims expired claims and claims the oldest action who may take,
// in one write transaction, and says so once it has committed (logs,
// wake-ups, the new member's renewal). skip is a JSON array of the seqs
// not to claim (noSkip for none).
//
// p, the caller's latest look, picks the path: when who is a live member
// with a fresh lease and no other claim's lease has run out, a single
// statement claims (claimFast: the common case, kept short because the
// write lock is held meanwhile); otherwise the transaction looks again and
// also reclaims, joins who or refreshes its lease (claimFull).
func (b *Board) claim(ctx context.Context, who identity.ID, p peekResult, skip string) (claimResult, error) {
	var (
		c   claimResult
		err error
	)
	if now := b.nowMS(); p.member && (p.expiry == 0 || p.expiry > now) && p.lease > now+b.claimMargin() {
		c, err = b.claimFast(ctx, who, p, skip)
	} else {
		err = b.write(ctx, "claim", func(t wtx) error {
			var err error
			c, err = b.claimFull(t, who, skip)
			return err
		})
	}
	if err != nil {
		return claimResult{}, err
	}
	b.announce(who, c)
	return c, nil
}

// claimMargin is how long a claimant's lease must have left: it must
// outlast the wait for its next renewal tick (an idle member does not
// renew), with a failed renewal to spare.
func (b *Board) claimMargin() int64 { return (b.opts.Lease - b.opts.Renew).Milliseconds() }

// claimFast claims in one statement for a live member whose lease is
// fresh, when the look p found no lease run out.
func (b *Board) claimFast(ctx context.Context, who identity.ID, p peekResult, skip string) (claimResult, error) {
	c := claimResult{lease: p.lease, leaseEnd: p.expiry}
	err := b.write(ctx, "claim", func(t wtx) error {
		var err error
		c.rec, err = scanRecord(t.row(takeOldest, string(who), b.nowMS(), who.Agent(), skip))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		c.ok = err == nil
		return err
	})
	return c, err
}

// claimFull looks again inside the transaction t, then joins who or
// refreshes its lease, reclaims what ran out and claims. Looking before
// writing means that when waiters race for one action, the losers find
// nothing and end without writing.
func (b *Board) claimFull(t wtx, who identity.ID, skip string) (claimResult, error) {
	var (
		c          claimResult
		now        = b.nowMS()
		departed   sql.NullBool
		leaseUntil sql.NullInt64
		earliest   sql.NullInt64
		candidate  sql.NullInt64
	)
	err := t.row(`SELECT
			(SELECT departed_at IS NOT NULL FROM members WHERE identity = ?1),
			(SELECT lease_until FROM members WHERE identity = ?1),
			(`+earliestLease+`),
			(`+oldestFor+`)`,
		string(who), now, who.Agent(), skip).Scan(&departed, &leaseUntil, &earliest, &candidate)
	if err != nil {
		return claimResult{}, err
	}
	anyExpired := earliest.Valid && earliest.Int64 <= now
	if earliest.Valid && !anyExpired {
		c.leaseEnd = earliest.Int64
	}
	switch {
	case departed.Valid && departed.Bool:
		return claimResult{}, fmt.Errorf("next for %s: %w; join it again or use a new identity", who, ErrDeparted)
	case !anyExpired && !candidate.Valid:
		return c, nil
	}

	if c.joined, c.lease, err = b.joinOrRefresh(t, who, now, departed.Valid, leaseUntil.Int64); err != nil {
		return claimResult{}, err
	}
	if anyExpired {
		if c.reclaimed, c.holders, err = reclaimExpired(t, who, now); err != nil {
			return claimResult{}, err
		}
	}
	c.rec, err = scanRecord(t.row(takeOldest, string(who), now, who.Agent(), skip))
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	c.ok = err == nil
	return c, err
}

// joinOrRefresh makes who a member (when it has no row: known is false)
// or refreshes a lease that has run low, and returns who's lease end. An
// idle member does not renew, and a late renewal is possible: a
// claimant's lease must not run out before its next renewal.
func (b *Board) joinOrRefresh(t wtx, who identity.ID, now int64, known bool, lease int64) (joined bool, _ int64, err error) {
	switch {
	case !known:
		lease = now + b.opts.Lease.Milliseconds()
		_, err = t.exec(`INSERT INTO members (identity, agent, pid, joined_at, renewed_at, lease_until)
			VALUES (?, ?, ?, ?, ?, ?)`, string(who), who.Agent(), os.Getpid(), now, now, lease)
		return true, lease, err
	case lease < now+b.claimMargin():
		lease = now + b.opts.Lease.Milliseconds()
		_, err = t.exec(`UPDATE members SET lease_until = ? WHERE identity = ?`, lease, string(who))
	}
	return false, lease, err
}

// reclaimExpired puts back to open every claim (but who's) whose holder is
// departed, unknown or out of lease, and returns their ids and holders. A
// holder renews while it holds a claim, so one whose lease ran out has
// died: it departs, and what was addressed to it goes to its agent name.
func reclaimExpired(t wtx, who identity.ID, now int64) (reclaimed, holders []string, err error) {
	rows, err := t.rows(`SELECT seq, holder FROM actions WHERE `+expiredClaims, string(who), now)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var seq int64
		var holder string
		if err := rows.Scan(&seq, &holder); err != nil {
			rows.Close()
			return nil, nil, err
		}
		reclaimed = append(reclaimed, position.ActionID(seq))
		holders = append(holders, holder)
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	if _, err := t.exec(`UPDATE actions SET state = 'open', holder = '', claimed_at = NULL, rev = `+nextRev+`
		WHERE `+expiredClaims, string(who), now); err != nil {
		return nil, nil, err
	}
	gone := slices.Clone(holders)
	slices.Sort(gone)
	for _, h := range slices.Compact(gone) {
		if _, err := identity.Parse(h); err != nil {
			continue
		}
		if _, _, err := departTx(t, identity.ID(h), now); err != nil {
			return nil, nil, err
		}
	}
	return reclaimed, holders, nil
}

// announce says what a committed claim attempt did: logs, wake-ups (a
// reclaim wakes everyone; a claim only those watching), and the renewal
// of a member it joined.
func (b *Board) announce(who identity.ID, c claimResult) {
	if len(c.reclaimed) > 0 {
		holders := slices.Clone(c.holders)
		slices.Sort(holders)
		b.log.Info("claims reclaimed: their holders' leases ran out", logkey.ActionIDs, c.reclaimed, logkey.Holder, slices.Compact(holders))
		b.notify.touch(evClaimable, wakeup.Everyone)
	}
	if c.joined {
		b.log.Info("member joined by its first claim", logkey.Identity, string(who))
		b.startRenewal(actions.Member{ID: who, PID: os.Getpid()})
	}
	if c.ok {
		b.notify.touch(evChanged, wakeup.Everyone)
		b.log.Info("action claimed", logkey.ActionID, c.rec.ID, logkey.Identity, string(who))
	}
}

// hotFor is how long after a claim that followed a look an identity counts
// as draining a queue, and claims without looking first (see Next). Its
// claims in that time reuse what the look found, so it looks again at
// least this often. It is at most half a lease: a claimant's lease has at
// least Lease-Renew (at least half a lease, since Open refuses a longer
// Renew) to run when it claims, so no claim made after the look can run
// out before the identity looks again, and expired claims still go back
// before any claim.
func (b *Board) hotFor() time.Duration { return min(time.Second, b.opts.Lease/2) }

// hot is what Next remembers of an identity's last look.
type hot struct {
	at     time.Time // when it looked
	lease  int64     // its own lease end (ms)
	expiry int64     // the earliest lease end among others' claims (ms), 0 for none
}

// markHot records that who has just claimed; looked says whether a fresh
// look (rather than a remembered one) led to the claim.
func (b *Board) markHot(who identity.ID, lease, expiry int64, looked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hot[who]
	if looked {
		h.at, h.expiry = b.clock.Now(), expiry
	}
	h.lease = lease
	b.hot[who] = h
}

// hotLook returns what who's last look found, if who claimed after looking
// within hotFor.
func (b *Board) hotLook(who identity.ID) (hot, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.hot[who]
	if ok && b.clock.Now().Sub(h.at) > b.hotFor() {
		delete(b.hot, who)
		ok = false
	}
	return h, ok
}
