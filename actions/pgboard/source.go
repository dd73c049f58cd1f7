package pgboard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/pages"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// recordCols are the columns scanRecord reads, in order.
const recordCols = `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, ended_at`

// recordColsOf is recordCols of the table aliased alias.
func recordColsOf(alias string) string {
	cols := strings.Split(recordCols, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// xid is the id of the current transaction, as the rev it writes.
const xid = `pg_current_xact_id()::text::bigint`

func scanRecord(row pgx.Row, extra ...any) (actions.Record, error) {
	var (
		r                  actions.Record
		state              string
		posted             time.Time
		claimedAt, endedAt *time.Time
	)
	dest := append([]any{&r.Seq, &r.To, &r.From, &r.Title, &r.Body, &state, &r.Holder, &r.Result, &r.Reason, &r.EndedBy,
		&posted, &claimedAt, &endedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return actions.Record{}, err
	}
	r.ID = position.ActionID(r.Seq)
	r.State = actions.State(state)
	r.PostedAt = posted.UTC()
	if claimedAt != nil {
		t := claimedAt.UTC()
		r.ClaimedAt = &t
	}
	if endedAt != nil {
		t := endedAt.UTC()
		r.EndedAt = &t
	}
	return r, nil
}

// collect scans every row of rows as a record.
func collect(rows pgx.Rows, err error) ([]actions.Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []actions.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// Post implements actions.Source: an open action from who, which is an
// identity or a person ("user:<name>"), for to ("" for anyone, an agent
// name or a live identity). It refuses what actions.CheckPost refuses, and
// an identity that is not live (actions.ErrNotLive, naming the live
// identities of its agent). Posting wakes the waiters that may take the
// action, on every machine.
func (b *Board) Post(ctx context.Context, by actions.Poster, d actions.Draft) (actions.Record, error) {
	who, to, title, body := identity.ID(by), d.To, d.Title, d.Body
	title, err := actions.CheckPost(who, to, title, body)
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	if err := b.checkLive(ctx, to); err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	var rec actions.Record
	err = b.write(ctx, "post", func(ctx context.Context, tx pgx.Tx) error {
		var err error
		rec, err = scanRecord(tx.QueryRow(ctx, `INSERT INTO bee_actions (to_whom, from_whom, title, body, state, posted_at, rev)
			VALUES ($1, $2, $3, $4, 'open', `+nowSQL("$5")+`, `+xid+`) RETURNING `+recordCols, to, string(who), title, body, b.now()))
		if err != nil {
			return err
		}
		return b.notify(ctx, tx, evClaimable, keyOf(evClaimable, rec))
	})
	if err != nil {
		return actions.Record{}, fmt.Errorf("post: %w", err)
	}
	b.listen.broadcast(evClaimable, keyOf(evClaimable, rec))
	b.log.Info("action posted", logkey.ActionID, rec.ID, logkey.From, rec.From, logkey.To, rec.To)
	return rec, nil
}

// Get implements actions.Source: the action with the given id, or
// actions.ErrUnknownAction. Members of this machine whose process died
// depart first.
func (b *Board) Get(ctx context.Context, id string) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("action %q: %w", id, position.UnknownHint(id))
	}
	b.reap(ctx)
	var rec actions.Record
	err := b.read(ctx, "get "+id, func(ctx context.Context) error {
		var err error
		rec, err = scanRecord(b.pool.QueryRow(ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = $1`, seq))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
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
// of text), with the cursor to page on from. A claim whose holder is gone
// is marked HolderGone.
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
	query := `SELECT ` + recordCols + ` FROM bee_actions WHERE seq > $1 ORDER BY seq LIMIT $2`
	args := []any{after, b.opts.PageSize}
	if len(states) > 0 {
		names := make([]string, len(states))
		for i, s := range states {
			names[i] = string(s)
		}
		query = `SELECT ` + recordCols + ` FROM bee_actions WHERE seq > $1 AND state = ANY($3) ORDER BY seq LIMIT $2`
		args = append(args, names)
	}
	b.reap(ctx)
	page := actions.Page{Records: []actions.Record{}, Cursor: b.cursors().Seq(after)}
	err = b.read(ctx, "list", func(ctx context.Context) error {
		page = actions.Page{Records: []actions.Record{}, Cursor: b.cursors().Seq(after)}
		rows, err := b.pool.Query(ctx, query, args...)
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
// result (at most actions.MaxResultLen bytes) kept on it, and its poster's
// waiters wake. It returns actions.ErrUnknownAction, actions.ErrNotHeld
// (naming the holder) or actions.ErrEnded (naming who ended it, and why).
func (b *Board) Finish(ctx context.Context, who identity.ID, id, result string) (actions.Record, error) {
	if err := actions.CheckText("result", result, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("finish %s: %w", id, err)
	}
	return b.end(ctx, "finish", who, id, `state = 'done', result = $3`, result)
}

// Fail implements actions.Source: the action who holds becomes failed, with
// reason (non-empty) kept on it, and its poster's waiters wake. It returns
// the same errors as Finish, and actions.ErrEmptyReason.
func (b *Board) Fail(ctx context.Context, who identity.ID, id, reason string) (actions.Record, error) {
	if strings.TrimSpace(reason) == "" {
		return actions.Record{}, fmt.Errorf("fail %s: %w: say why it could not be done", id, actions.ErrEmptyReason)
	}
	if err := actions.CheckText("reason", reason, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("fail %s: %w", id, err)
	}
	return b.end(ctx, "fail", who, id, `state = 'failed', reason = $3`, reason)
}

// toldAtEnd is told_at for an action that ends at now (a nowSQL): a
// person's post counts as told at once (people are not woken; they ask),
// an agent's waits for its poster to hear.
func toldAtEnd(now string) string {
	return `(CASE WHEN starts_with(from_whom, 'user:') THEN ` + now + ` END)`
}

// end ends an action who holds with the SET clause set, whose $3 is arg.
func (b *Board) end(ctx context.Context, op string, who identity.ID, id, set, arg string) (actions.Record, error) {
	rec, err := b.settle(ctx, op, who, id, evEnded,
		set+`, ended_by = $2, ended_at = `+nowSQL("$4")+`, told_at = `+toldAtEnd(nowSQL("$4")), arg, b.now())
	if err != nil {
		return actions.Record{}, err
	}
	b.log.Info("action ended", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.State, rec.State)
	return rec, nil
}

// Release implements actions.Source: the action who holds goes back to
// open, at its place in the posting order, and the waiters on every machine
// wake. It returns the same errors as Finish.
func (b *Board) Release(ctx context.Context, who identity.ID, id string) (actions.Record, error) {
	rec, err := b.settle(ctx, "release", who, id, evClaimable, `state = 'open', holder = '', claimed_at = NULL`)
	if err != nil {
		return actions.Record{}, err
	}
	b.log.Info("action released", logkey.ActionID, rec.ID, logkey.Identity, string(who))
	return rec, nil
}

// settle changes an action who holds with the SET clause set ($1 is the
// action's seq, $2 who, $3 on the arguments args), after checking that who
// holds it, and wakes the waiters ev concerns.
func (b *Board) settle(ctx context.Context, op string, who identity.ID, id string, ev event, set string, args ...any) (actions.Record, error) {
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
	}
	var rec actions.Record
	err := b.write(ctx, op, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		rec, err = scanRecord(tx.QueryRow(ctx,
			`UPDATE bee_actions SET `+set+`, rev = `+xid+` WHERE seq = $1 AND state = 'claimed' AND holder = $2 RETURNING `+recordCols,
			append([]any{seq, string(who)}, args...)...))
		if err == nil {
			return b.notify(ctx, tx, ev, keyOf(ev, rec))
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Not changed: say why.
		cur, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = $1`, seq))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%s action %q: %w", op, id, actions.ErrUnknownAction)
		case err != nil:
			return err
		case cur.State.Ended():
			return actions.EndedErr(op, cur)
		case cur.State == actions.Open:
			return fmt.Errorf("%s: action %s is open, not held by %s: %w", op, id, who, actions.ErrNotHeld)
		default:
			return fmt.Errorf("%s: action %s is held by %s, not %s: %w", op, id, cur.Holder, who, actions.ErrNotHeld)
		}
	})
	if err != nil {
		if isSentinel(err) {
			return actions.Record{}, err
		}
		return actions.Record{}, fmt.Errorf("%s %s: %w", op, id, err)
	}
	b.listen.broadcast(ev, keyOf(ev, rec))
	return rec, nil
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
	if err := actions.CheckText("reason", reason, actions.MaxResultLen); err != nil {
		return actions.Record{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("cancel action %q: %w", id, actions.ErrUnknownAction)
	}
	var rec actions.Record
	err := b.write(ctx, "cancel", func(ctx context.Context, tx pgx.Tx) error {
		cur, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = $1 FOR UPDATE`, seq))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("cancel action %q: %w", id, actions.ErrUnknownAction)
		case err != nil:
			return err
		case cur.State.Ended():
			return actions.EndedErr("cancel", cur)
		case !actions.MayManage(who, cur.From):
			return fmt.Errorf("cancel: action %s was posted by %s; only a person or an identity of its agent may cancel it: %w",
				id, cur.From, actions.ErrNotPoster)
		}
		told := cur.From == string(who) || actions.IsUser(cur.From)
		rec, err = scanRecord(tx.QueryRow(ctx, `UPDATE bee_actions SET state = 'cancelled', reason = $2, ended_by = $3,
			ended_at = `+nowSQL("$5")+`, told_at = CASE WHEN $4 THEN `+nowSQL("$5")+` END, rev = `+xid+`
			WHERE seq = $1 RETURNING `+recordCols, seq, reason, string(who), told, b.now()))
		if err != nil {
			return err
		}
		return b.notify(ctx, tx, evEnded, keyOf(evEnded, rec))
	})
	if err != nil {
		if isSentinel(err) {
			return actions.Record{}, err
		}
		return actions.Record{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	b.listen.broadcast(evEnded, keyOf(evEnded, rec))
	b.log.Info("action cancelled", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.Holder, rec.Holder)
	return rec, nil
}

// Readdress implements actions.Board: an open action goes to to ("", an
// agent name or a live identity), and the waiters on every machine wake.
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
	seq, ok := position.ParseActionID(id)
	if !ok {
		return actions.Record{}, fmt.Errorf("readdress action %q: %w", id, actions.ErrUnknownAction)
	}
	var rec actions.Record
	err := b.write(ctx, "readdress", func(ctx context.Context, tx pgx.Tx) error {
		cur, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordCols+` FROM bee_actions WHERE seq = $1 FOR UPDATE`, seq))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("readdress action %q: %w", id, actions.ErrUnknownAction)
		case err != nil:
			return err
		case cur.State.Ended():
			return actions.EndedErr("readdress", cur)
		case cur.State == actions.Claimed:
			return fmt.Errorf("readdress: action %s is held by %s; it can be re-addressed once it is released (or cancel it): %w",
				id, cur.Holder, actions.ErrNotOpen)
		case !actions.MayManage(who, cur.From):
			return fmt.Errorf("readdress: action %s was posted by %s; only a person or an identity of its agent may re-address it: %w",
				id, cur.From, actions.ErrNotPoster)
		}
		rec, err = scanRecord(tx.QueryRow(ctx, `UPDATE bee_actions SET to_whom = $2, rev = `+xid+` WHERE seq = $1 RETURNING `+recordCols, seq, to))
		if err != nil {
			return err
		}
		return b.notify(ctx, tx, evClaimable, keyOf(evClaimable, rec))
	})
	if err != nil {
		if isSentinel(err) {
			return actions.Record{}, err
		}
		return actions.Record{}, fmt.Errorf("readdress %s: %w", id, err)
	}
	b.listen.broadcast(evClaimable, keyOf(evClaimable, rec))
	b.log.Info("action re-addressed", logkey.ActionID, rec.ID, logkey.Identity, string(who), logkey.To, rec.To)
	return rec, nil
}

// cursors makes and reads this board's cursors.
func (b *Board) cursors() position.Cursors { return position.Cursors{ID: b.id, Where: b.location} }
