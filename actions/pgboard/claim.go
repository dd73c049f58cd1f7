package pgboard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// The claim in one round trip (engine.Claimer). A claim used to be a
// transaction of seven to nine round trips (its id, the version check, the
// member row FOR SHARE, the planner's settings, the take, a NOTIFY, the
// COMMIT) after a look of its own; on a durable server a NOTIFY in a
// commit serialises commits across the server. Now one statement, sent
// with the planner's settings in one pipeline (one implicit transaction,
// one round trip), looks and claims:
//
//   - the schema version: a database a newer bee migrated claims nothing
//     and stops the Board (ErrNewerSchema), as firstTrip does for a write;
//   - the member row: departed, the statement claims nothing
//     (ErrDeparted); absent, it joins the claimant for this process;
//   - whether a claim must go back first: another live member's lease ran
//     out, or (looked at once a second, see orphanEvery) a claim's holder
//     is not a live member. Then it claims nothing, and the engine's claim
//     transaction reclaims and claims (Claimed.Slow), with the engine's
//     policy (departTx);
//   - the claim: the first action the claimant may take (openFor), in
//     (priority, seq) order, that nobody holds locked. An action that
//     carries paths is left to the engine's transaction, which reserves
//     them (Claimed.Slow).
//
// What it guarantees:
//
//   - An empty claim writes nothing: it locks no row and forces no
//     transaction id, so it commits nothing. The member row is locked
//     (FOR SHARE) only when an action the claimant may take was there.
//   - The member row is locked before the action: a departure in flight
//     (which locks the member row, then puts its claims back) either
//     commits before the claim, which then sees the claimant departed,
//     or waits for it, and then puts the claim back.
//   - The commit carries no NOTIFY: the engine tells the claim after it
//     (Store.Tell), and the Board sends the change channel's notification
//     coalesced (see Board.tellChanged).
//   - A claim whose answer is lost is resolved by reading the row: the
//     claim writes a random token with it (in told_at, which nothing
//     reads while an action is open or claimed, and which every end
//     writes afresh), and the resolution ends the statement's backend
//     first, so that it can commit no more, then looks for the token.

// orphanEvery is how often a claim also looks for claims whose holder is
// not a live member. Bee's own writes make none (a departure puts its
// claims back in its transaction, and a claim locks the member row
// against it); the look, which reads every claim, is a defence, so it is
// paid at most once a second per Board.
const orphanEvery = time.Second

// claimSQL is the claim's statement. $1 the claimant, $2 its recipients
// and $3 the seqs to skip (see openFor), $4 the board's time (see
// nowSQL), $5 Board.graceMS, $6 its agent, $7 the host, $8 the host key,
// $9 the pid, $10 the lease in milliseconds, $11 the claim's token, $12
// this bee's schema version, $13 whether to look for orphaned claims.
var claimSQL = `WITH
v AS MATERIALIZED (SELECT coalesce(max(version), 0) AS version FROM bee_schema_version),
m AS MATERIALIZED (SELECT departed_at IS NOT NULL AS departed FROM bee_members WHERE identity = $1),
j AS (INSERT INTO bee_members (identity, agent, host, host_key, pid, joined_at, renewed_at, lease_until)
	SELECT $1, $6, $7, $8, $9, ` + nowSQL("$4") + `, ` + nowSQL("$4") + `, ` + nowSQL("$4") + ` + $10 * interval '1 millisecond'
	WHERE NOT EXISTS (SELECT 1 FROM m) AND (SELECT version FROM v) <= $12
	ON CONFLICT (identity) DO NOTHING RETURNING 1),
e AS MATERIALIZED (SELECT min(` + leaseEnd("x", "$5") + `) AS expiry FROM bee_members x WHERE x.departed_at IS NULL AND x.identity <> $1),
r AS MATERIALIZED (SELECT coalesce((SELECT expiry FROM e) <= ` + nowSQL("$4") + `, false)
	OR ($13 AND EXISTS (SELECT 1 FROM bee_actions a WHERE a.state = 'claimed' AND a.holder <> $1
		AND NOT EXISTS (SELECT 1 FROM bee_members o WHERE o.identity = a.holder AND o.departed_at IS NULL))) AS reclaim),
g AS MATERIALIZED (SELECT (SELECT version FROM v) <= $12 AND NOT coalesce((SELECT departed FROM m), false)
	AND NOT (SELECT reclaim FROM r) AS go),
lm AS (SELECT 1 FROM bee_members WHERE identity = $1 AND departed_at IS NULL
	AND (SELECT go FROM g) AND EXISTS (SELECT 1 FROM bee_actions WHERE ` + openFor + `) FOR SHARE),
c AS (SELECT seq, cardinality(paths) > 0 AS slow FROM bee_actions WHERE ` + openFor + `
	AND (EXISTS (SELECT 1 FROM lm) OR EXISTS (SELECT 1 FROM j))
	ORDER BY priority, seq LIMIT 1 FOR UPDATE SKIP LOCKED),
u AS (UPDATE bee_actions a SET state = 'claimed', holder = $1, claimed_at = ` + nowSQL("$4") + `, rev = ` + xid + `,
		told_at = ` + tokenSQL("$11") + `
	FROM c WHERE a.seq = c.seq AND NOT c.slow RETURNING ` + recordColsOf("a") + `)
SELECT u.*, (SELECT version FROM v), coalesce((SELECT departed FROM m), false), EXISTS (SELECT 1 FROM m), EXISTS (SELECT 1 FROM j),
	EXISTS (SELECT 1 FROM bee_actions WHERE ` + openFor + `), (SELECT reclaim FROM r), coalesce((SELECT slow FROM c), false),
	(SELECT expiry FROM e), greatest((SELECT coalesce(max(seq), 0) FROM bee_actions), (SELECT coalesce(max(seq), 0) FROM bee_ended_actions)),
	` + nowSQL("$4") + `
FROM (SELECT 1) one LEFT JOIN u ON true`

// tokenSQL is the told_at that holds the claim token p: a time in the
// 1970s, which no told action has.
func tokenSQL(p string) string {
	return `'epoch'::timestamptz + ` + p + ` * interval '1 microsecond'`
}

// newClaimToken is a claim's token: random, within the 2⁴⁷ microseconds
// tokenSQL maps to 1970-1974.
func newClaimToken() int64 { return 1 + rand.Int64N(1<<47-1) }

// plannerSQL sets, for the claim's implicit transaction, the planner
// settings that keep it on bee_actions_open (see ptx.Take).
const plannerSQL = `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)`

var _ engine.Claimer = (*store)(nil)

// Claim implements engine.Claimer: the statement claimSQL, retried while
// the server is unreachable (until Options.Retry or ctx's deadline), and
// resolved by its token when its answer is lost.
func (s *store) Claim(ctx context.Context, w engine.Want) (engine.Claimed, error) {
	b := s.b()
	if err := b.closed(); err != nil {
		return engine.Claimed{}, err
	}
	start := time.Now()
	octx, cancel := b.life.Bound(ctx, b.opts.Retry)
	defer cancel()
	for n := 0; ; n++ {
		a := claimAttempt{b: b, w: w, token: newClaimToken()}
		got, err := a.run(octx, commitBy(ctx))
		if err != nil && a.sent {
			// The answer is lost: find out what the statement did.
			var known bool
			got, known, err = a.settle(ctx, err)
			switch {
			case !known:
				return engine.Claimed{}, err // an *engine.ClaimUnsure
			case got.OK || got.Joined:
				got.At = b.clock.Now()
				return got, nil
			}
		}
		if err == nil {
			return got, nil
		}
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) && !a.sent {
			// The caller's time is up (its context may not say so yet):
			// nothing was claimed.
			return engine.Claimed{}, nil
		}
		if isSentinel(err) {
			return engine.Claimed{}, err
		}
		if err = b.schemaGone(octx, err); isSentinel(err) {
			return engine.Claimed{}, err
		}
		if !retryable(err) || !backoff(octx, n) {
			return engine.Claimed{}, b.fail(ctx, "claim", err, time.Since(start))
		}
	}
}

// A claimAttempt is one sending of the claim's statement.
type claimAttempt struct {
	b     *Board
	w     engine.Want
	token int64
	pids  []uint32 // the backends the statement may have gone to (the first: its claimer's key)
	sent  bool     // the statement may have reached the server
}

// run sends the statement, through the machine's claimer when there is
// one (see machine.go), else on a connection of its own, and waits for its
// answer until by, whatever ctx does once it is sent: a claim runs to its
// end, and the engine gives back what nobody received.
func (a *claimAttempt) run(ctx context.Context, by time.Time) (engine.Claimed, error) {
	b := a.b
	req := a.request()
	var got claimRow
	err := errNoMachine
	if r := b.machineRoute(by); r != nil {
		got, err = r.claim(ctx, a, req, by)
		if err != nil && a.sent {
			// Its answer is lost: Claim settles it, which ends the
			// claimer's backend, and claims on without the machine for a
			// while; the claimer, its backend gone, cannot serve again.
			b.machineGone.Store(a.pids[0])
			b.quietMachine("answer", err)
		}
	}
	if errors.Is(err, errNoMachine) {
		a.pids, a.sent = nil, false
		got, err = a.direct(ctx, req, by)
	}
	if err != nil {
		return engine.Claimed{}, err
	}
	got.At = b.clock.Now()
	if got.Version > schemaVersion {
		return engine.Claimed{}, b.refuseNewer(got.Version)
	}
	if !got.Member && !got.Joined && !got.Departed {
		// Another process joined the claimant as this statement did:
		// its row was not in the statement's snapshot. Looking again
		// sees it.
		return engine.Claimed{}, errJoinRaced
	}
	c := got.Claimed
	c.Member = got.Member || got.Joined
	return c, nil
}

// direct sends req on a connection of the pool.
func (a *claimAttempt) direct(ctx context.Context, req claimRequest, by time.Time) (claimRow, error) {
	b := a.b
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return claimRow{}, err
	}
	defer conn.Release()
	if err := ctx.Err(); err != nil {
		return claimRow{}, err
	}
	a.pids = []uint32{conn.Conn().PgConn().PID()}
	if b.opts.inClaim != nil {
		b.opts.inClaim(a.pids[0])
	}
	if b.opts.beforeCommit != nil {
		b.opts.beforeCommit()
	}
	dctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	rows, err := claimBatch(dctx, conn.Conn(), []claimRequest{req})
	if err != nil {
		var be *batchError
		if errors.As(err, &be) {
			err = be.err
		}
		var pe *pgconn.PgError
		a.sent = !errors.As(err, &pe) && !pgconn.SafeToRetry(err)
		return claimRow{}, err
	}
	return rows[0], nil
}

// request is the attempt's statement's parameters.
func (a *claimAttempt) request() claimRequest {
	b := a.b
	r := claimRequest{Who: string(a.w.Who), Recipients: a.w.Recipients(), Skip: a.w.Skip, GraceMS: b.graceMS(),
		Agent: a.w.Who.Agent(), Host: b.host, HostKey: b.hostKey, PID: os.Getpid(), LeaseMS: b.opts.Lease.Milliseconds(),
		Token: a.token, Orphans: b.lookForOrphans()}
	if t, ok := b.now().(time.Time); ok {
		r.Now = &t
	}
	return r
}

// A claimRequest is what claimSQL takes, bar the schema version: one
// claimant's claim, sent by its own Board or by the machine's claimer.
type claimRequest struct {
	Who        string     `json:"who"`
	Recipients []string   `json:"recipients"`
	Skip       []int64    `json:"skip"`
	Now        *time.Time `json:"now,omitempty"` // the board's time (see Board.now); nil: the server's
	GraceMS    int64      `json:"graceMS"`
	Agent      string     `json:"agent"`
	Host       string     `json:"host"`
	HostKey    string     `json:"hostKey"`
	PID        int        `json:"pid"`
	LeaseMS    int64      `json:"leaseMS"`
	Token      int64      `json:"token"`
	Orphans    bool       `json:"orphans"`
}

func (r claimRequest) args() []any {
	var now any
	if r.Now != nil {
		now = *r.Now
	}
	return []any{r.Who, r.Recipients, r.Skip, now, r.GraceMS, r.Agent, r.Host, r.HostKey, r.PID, r.LeaseMS, r.Token,
		schemaVersion, r.Orphans}
}

// A batchError is claimBatch's error: which statement failed (-1: none
// in particular), and why.
type batchError struct {
	at  int
	err error
}

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// claimBatch sends the claims reqs, in order, in one pipeline on conn: one
// implicit transaction, one commit, one round trip. Each statement sees
// the claims of those before it, so no action is claimed twice. The rows
// are only returned once the commit has answered; an error (a
// *batchError) means that none of the claims committed when the server
// refused a statement (a *pgconn.PgError), and that it is not known
// otherwise, unless pgconn.SafeToRetry says nothing was sent.
func claimBatch(ctx context.Context, conn *pgx.Conn, reqs []claimRequest) ([]claimRow, error) {
	batch := &pgx.Batch{}
	batch.Queue(plannerSQL)
	for _, r := range reqs {
		batch.Queue(claimSQL, r.args()...)
	}
	br := conn.SendBatch(ctx, batch)
	rows, err := readClaims(br, len(reqs))
	if cerr := br.Close(); err == nil && cerr != nil {
		err = &batchError{at: -1, err: cerr}
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// readClaims reads the answers of a batch of n claims.
func readClaims(br pgx.BatchResults, n int) ([]claimRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, &batchError{at: -1, err: err}
	}
	rows := make([]claimRow, n)
	for i := range rows {
		var err error
		if rows[i], err = readClaim(br); err != nil {
			return nil, &batchError{at: i, err: err}
		}
	}
	return rows, nil
}

// errJoinRaced is the (retryable) error of a claim that met another's
// join of its claimant.
var errJoinRaced = &pgconn.PgError{Code: "40001", Message: "the claimant joined concurrently; claim again"}

// A claimRow is the statement's row, as it travels from the machine's
// claimer to its claimant.
type claimRow struct {
	engine.Claimed
	Version int  `json:"version"`
	Member  bool `json:"member"` // the claimant had a member row in the statement's snapshot
}

// readClaim reads one claim statement's answer.
func readClaim(br pgx.BatchResults) (claimRow, error) {
	var got claimRow
	var expiry *time.Time
	row := &scanOptional{row: br.QueryRow(), n: recordColCount}
	rec, err := scanRecord(row, &got.Version, &got.Departed, &got.Member, &got.Joined,
		&got.Claimable, &got.Reclaim, &got.Slow, &expiry, &got.Head, &got.Now)
	if err != nil {
		return got, err
	}
	if expiry != nil {
		got.Expiry = *expiry
	}
	got.Slow = got.Slow || got.Reclaim
	if row.present {
		got.Rec, got.OK = rec, true
	}
	return got, nil
}

// settle finds out what a statement whose answer was lost (cause) did,
// within ctx's deadline (or Options.Retry, for a ctx without one): known
// is false when the server did not say by then, and err is then an
// *engine.ClaimUnsure that asks again in the background. When known and
// nothing was claimed or joined, err is cause.
func (a *claimAttempt) settle(ctx context.Context, cause error) (_ engine.Claimed, known bool, err error) {
	b := a.b
	limit := b.opts.Retry
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d)
	}
	actx, cancel := b.life.Bound(context.WithoutCancel(ctx), limit)
	defer cancel()
	got, err := a.resolve(actx)
	if err == nil {
		if got.OK {
			b.log.Info("a claim whose answer was lost had claimed", logkey.ActionID, got.Rec.ID)
		}
		return got, true, cause
	}
	b.log.Warn("a claim's answer was lost and the server has not said what it did; asking again in the background",
		logkey.Identity, string(a.w.Who), logkey.Err, b.scrub(err))
	return engine.Claimed{}, false, &engine.ClaimUnsure{
		Err: b.scrub(&reachError{sentinel: ErrUnreachable, cause: cause,
			msg: fmt.Sprintf("board %s: claim: the PostgreSQL server has not answered, after the claim was sent: it may have claimed or not",
				b.location)}),
		Resolve: func(ctx context.Context) (engine.Claimed, error) {
			ctx, cancel := b.life.Bound(ctx, forever)
			defer cancel()
			return a.resolve(ctx)
		},
	}
}

// resolve ends the backends the statement may have gone to, so that it can commit
// no more (a statement held up on its way, say by a partition, dies with
// it), waits until it is gone, then reads what the statement did: the
// claimant's claim that carries its token, and whether the claimant is a
// member of this process. It asks again while the server is unreachable,
// until ctx ends (its error, then).
func (a *claimAttempt) resolve(ctx context.Context) (engine.Claimed, error) {
	for n := 0; ; n++ {
		got, err := a.resolveOnce(ctx)
		if err == nil {
			return got, nil
		}
		if ctx.Err() == nil && !retryable(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errBackendLives) {
			return engine.Claimed{}, err
		}
		if !backoff(ctx, n) {
			return engine.Claimed{}, ctx.Err()
		}
	}
}

// terminateSQL ends the backends $1 and says whether one still lives. The
// call is in the aggregate, which only sees the rows the WHERE kept: in
// one WHERE with the pid's test, the planner may call it first, for every
// backend of the server (PostgreSQL 15 does, for a pid that is gone).
const terminateSQL = `SELECT coalesce(bool_or(NOT pg_terminate_backend(pid, 1000)), false) FROM pg_stat_activity WHERE pid = ANY($1::bigint[])`

// errBackendLives: the statement's backend has not ended yet.
var errBackendLives = errors.New("the claim's backend still runs")

func (a *claimAttempt) resolveOnce(ctx context.Context) (engine.Claimed, error) {
	b := a.b
	qctx, cancel := context.WithTimeout(ctx, askBound)
	defer cancel()
	var lives bool
	pids := make([]int64, len(a.pids))
	for i, p := range a.pids {
		pids[i] = int64(p)
	}
	err := b.pool.QueryRow(qctx, terminateSQL, pids).Scan(&lives)
	switch {
	case err != nil:
		return engine.Claimed{}, err
	case lives:
		return engine.Claimed{}, errBackendLives
	}
	var got engine.Claimed
	got.Rec, got.OK, err = found(scanRecord(b.pool.QueryRow(qctx, `SELECT `+recordCols+` FROM bee_actions
		WHERE state = 'claimed' AND holder = $1 AND told_at = `+tokenSQL("$2"), string(a.w.Who), a.token)))
	if err != nil {
		return engine.Claimed{}, err
	}
	err = b.pool.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM bee_members WHERE identity = $1 AND departed_at IS NULL
		AND host_key = $2 AND pid = $3)`, string(a.w.Who), b.hostKey, os.Getpid()).Scan(&got.Joined)
	// A member this Board already renews was not joined by the claim.
	got.Joined = got.Joined && !b.renews(a.w.Who)
	return got, err
}

// renews reports whether this Board renews who's lease.
func (b *Board) renews(who identity.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.members[who]
	return ok
}

// lookForOrphans says whether this claim also looks for claims whose
// holder is not a live member: once per orphanEvery.
func (b *Board) lookForOrphans() bool {
	now := time.Now().UnixNano()
	last := b.orphansAt.Load()
	return now-last >= int64(orphanEvery) && b.orphansAt.CompareAndSwap(last, now)
}

// A scanOptional is a row whose first n columns (a record's, see
// recordCols) are all NULL when there is no record: Scan reads each of
// them through a pointer, which NULL leaves nil, and sets present when
// there is a record.
type scanOptional struct {
	row     pgx.Row
	n       int
	present bool
}

// recordColCount is the number of columns of recordCols.
const recordColCount = 18

func (o *scanOptional) Scan(dest ...any) error {
	args := slices.Clone(dest)
	ptrs := make([]reflect.Value, min(o.n, len(dest)))
	for i := range ptrs {
		ptrs[i] = reflect.New(reflect.TypeOf(dest[i]))
		args[i] = ptrs[i].Interface()
	}
	if err := o.row.Scan(args...); err != nil {
		return err
	}
	o.present = len(ptrs) > 0 && !ptrs[0].Elem().IsNil()
	if !o.present {
		return nil
	}
	for i, p := range ptrs {
		if !p.Elem().IsNil() {
			reflect.ValueOf(dest[i]).Elem().Set(p.Elem().Elem())
		}
	}
	return nil
}
