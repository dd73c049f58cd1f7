package pgboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/internal/logkey"
)

// The schema, one migration per version. bee_schema_version holds the
// version of the database in its one row; Open applies the migrations it
// lacks in one transaction, under an advisory lock so that bridges starting
// together do not race, and refuses a database whose version is higher than
// len(migrations)-1. Only a migration needs CREATE on the schema; a board
// that is up to date needs SELECT, INSERT, UPDATE and DELETE on its tables.
//
// bee_actions: one row per action; seq is the posting order (the id is
// "a-<seq>"). rev is the id of the transaction that changed the row last:
// Changes reports rows in (rev, seq) order, but only below the oldest
// transaction still running, so that a change committed late with a low
// rev is never skipped. Times are the server's.
//
// told_at is when the poster of an ended action heard of its end; while
// an action is open or claimed nothing reads it, and a claim writes its
// claim token there (a time in the 1970s, see tokenSQL), by which a claim
// whose answer was lost is found; every end writes told_at afresh.
//
// bee_members: one row per identity that joined. host_key says where its
// pid means something (see hostKey); lease_until is renewed every
// Options.Renew while the member lives.
//
// bee_meta: board_id (random, carried in cursors so that a cursor from
// another board is refused, and in the NOTIFY channels' names).
//
// Version 2 adds plans: the state blocked (an action that waits for
// prerequisites not yet done; never claimed, and it has no holder), the
// priority of an action (0 most urgent .. 4, default 2; claims walk
// bee_actions_open in (priority, seq) order), and bee_prerequisites, one
// row per edge: seq waits for pre (always an older action), ord its place
// in the after list as given; bee_prerequisites_pre finds an action's
// waiters, bee_actions_blocked the blocked actions addressed to an
// identity that departs. Every change is an ALTER, so columns other
// migrations add are kept whatever the order in which they run.
var migrations = []string{
	1: `
CREATE TABLE bee_meta (
	key   text PRIMARY KEY,
	value text NOT NULL
);

CREATE TABLE bee_actions (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	to_whom    text NOT NULL DEFAULT '',
	from_whom  text NOT NULL,
	title      text NOT NULL,
	body       text NOT NULL DEFAULT '',
	state      text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'claimed', 'done', 'failed', 'cancelled')),
	holder     text NOT NULL DEFAULT '',
	result     text NOT NULL DEFAULT '',
	reason     text NOT NULL DEFAULT '',
	ended_by   text NOT NULL DEFAULT '',
	posted_at  timestamptz NOT NULL,
	claimed_at timestamptz,
	ended_at   timestamptz,
	told_at    timestamptz,
	rev        bigint NOT NULL,
	CHECK (state <> 'open' OR holder = ''),
	CHECK (state NOT IN ('claimed', 'done', 'failed') OR holder <> '')
);
-- Claims walk the open actions in posting order and stop at the first
-- that is for the claimant: an index on (to_whom, seq) would have the
-- planner sort every open action for "anyone" at each claim.
CREATE INDEX bee_actions_open ON bee_actions (seq) WHERE state = 'open';
CREATE INDEX bee_actions_claimed ON bee_actions (holder) WHERE state = 'claimed';
CREATE INDEX bee_actions_rev ON bee_actions (rev, seq);
CREATE INDEX bee_actions_untold ON bee_actions (from_whom) WHERE told_at IS NULL AND state IN ('done', 'failed', 'cancelled');

CREATE TABLE bee_members (
	identity    text PRIMARY KEY,
	agent       text NOT NULL,
	host        text NOT NULL DEFAULT '',
	host_key    text NOT NULL DEFAULT '',
	pid         integer NOT NULL DEFAULT 0,
	claude_pid  integer NOT NULL DEFAULT 0,
	session_id  text NOT NULL DEFAULT '',
	joined_at   timestamptz NOT NULL,
	renewed_at  timestamptz NOT NULL,
	lease_until timestamptz NOT NULL,
	departed_at timestamptz,
	waiter_at   timestamptz
);
CREATE INDEX bee_members_agent ON bee_members (agent);
CREATE INDEX bee_members_live ON bee_members (lease_until) WHERE departed_at IS NULL;
`,
	2: `
ALTER TABLE bee_actions
	DROP CONSTRAINT bee_actions_state_check,
	ADD CONSTRAINT bee_actions_state_check CHECK (state IN ('open', 'blocked', 'claimed', 'done', 'failed', 'cancelled')),
	ADD CONSTRAINT bee_actions_blocked_check CHECK (state <> 'blocked' OR holder = ''),
	ADD COLUMN priority smallint NOT NULL DEFAULT 2 CONSTRAINT bee_actions_priority_check CHECK (priority BETWEEN 0 AND 4);
DROP INDEX bee_actions_open;
CREATE INDEX bee_actions_open ON bee_actions (priority, seq) WHERE state = 'open';
CREATE INDEX bee_actions_blocked ON bee_actions (to_whom) WHERE state = 'blocked';
CREATE TABLE bee_prerequisites (
	seq bigint NOT NULL REFERENCES bee_actions,
	pre bigint NOT NULL REFERENCES bee_actions,
	ord integer NOT NULL,
	PRIMARY KEY (seq, pre)
);
CREATE INDEX bee_prerequisites_pre ON bee_prerequisites (pre, seq);
`,
	3: reservationsMigration,
	4: `ALTER TABLE bee_members ADD COLUMN client text NOT NULL DEFAULT '';`,
	5: endedMigration,
}

// endedMigration is schema 5: ended actions leave the hot table. An action
// that ends (done, failed, cancelled) moves from bee_actions to
// bee_ended_actions in the transaction that ends it, keeping its seq and
// rev, so that what claims and the live views walk holds only the open,
// blocked and claimed actions, however long the board's history.
// bee_every_action is both, for the views that read every action (Get,
// List, Changes, plans). Seqs stay unique across the two: they are drawn
// only by bee_actions' identity, and a move deletes the row it inserts
// elsewhere in one transaction. The actions that ended before it are
// moved. bee_prerequisites loses its foreign keys (an edge names an action
// in either table); bee_actions_untold moves with the outcomes it finds.
var endedMigration = `
ALTER TABLE bee_prerequisites
	DROP CONSTRAINT IF EXISTS bee_prerequisites_seq_fkey,
	DROP CONSTRAINT IF EXISTS bee_prerequisites_pre_fkey;
CREATE TABLE bee_ended_actions (
	seq        bigint PRIMARY KEY,
	to_whom    text NOT NULL DEFAULT '',
	from_whom  text NOT NULL,
	title      text NOT NULL,
	body       text NOT NULL DEFAULT '',
	state      text NOT NULL CHECK (state IN ('done', 'failed', 'cancelled')),
	holder     text NOT NULL DEFAULT '',
	result     text NOT NULL DEFAULT '',
	reason     text NOT NULL DEFAULT '',
	ended_by   text NOT NULL DEFAULT '',
	posted_at  timestamptz NOT NULL,
	claimed_at timestamptz,
	ended_at   timestamptz,
	told_at    timestamptz,
	rev        bigint NOT NULL,
	priority   smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 0 AND 4),
	repo       text NOT NULL DEFAULT '',
	paths      text[] NOT NULL DEFAULT '{}',
	held_by    text NOT NULL DEFAULT '',
	CHECK (state = 'cancelled' OR holder <> '')
);
INSERT INTO bee_ended_actions (` + actionCols + `)
	SELECT ` + actionCols + ` FROM bee_actions WHERE state IN ('done', 'failed', 'cancelled') ORDER BY seq;
DELETE FROM bee_actions WHERE state IN ('done', 'failed', 'cancelled');
DROP INDEX bee_actions_untold;
CREATE INDEX bee_ended_actions_rev ON bee_ended_actions (rev, seq);
CREATE INDEX bee_ended_actions_untold ON bee_ended_actions (from_whom) WHERE told_at IS NULL;
CREATE VIEW bee_every_action AS
	SELECT ` + actionCols + ` FROM bee_actions
	UNION ALL
	SELECT ` + actionCols + ` FROM bee_ended_actions;
`

// actionCols are the stored columns of an action, in both of its tables.
const actionCols = `seq, to_whom, from_whom, title, body, state, holder, result, reason, ended_by, posted_at, claimed_at, ended_at, told_at, rev, priority, repo, paths, held_by`

// schemaVersion is the version this bee writes.
var schemaVersion = len(migrations) - 1

// migrateLock is the advisory lock key migrations hold ("bee" and 1).
const migrateLock = 0x62656501

// migrate checks the database's version, without writing when it is up to
// date, and brings an older schema up to date.
func (b *Board) migrate(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.opts.ConnectTimeout+b.opts.Retry)
	defer cancel()
	v, err := b.readVersion(ctx, b.pool)
	if err != nil {
		return b.fail(ctx, "read schema version", err, time.Since(start))
	}
	if v == 0 && b.opts.NoCreate {
		return &reachError{sentinel: ErrNoBoard,
			msg: fmt.Sprintf("no board in the database %s: nothing has been posted there yet; check the URL (a post creates the board)", b.location)}
	}
	if v < schemaVersion {
		if err := b.migrateLocked(ctx, start); err != nil {
			return err
		}
	}
	err = b.read(ctx, "read board id", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, `SELECT value FROM bee_meta WHERE key = 'board_id'`).Scan(&b.id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("board %s: it has no board id: %w", b.location, ErrNotBoard)
	}
	if err != nil {
		return err
	}
	if len(b.id) != 8 {
		return fmt.Errorf("board %s: its board id %q is malformed: %w", b.location, b.id, ErrNotBoard)
	}
	return nil
}

// migrateLocked applies the migrations the database lacks, holding a
// session advisory lock on one connection while it looks again and
// migrates. The lock is taken before the transaction begins, so that the
// transaction sees the tables another process created meanwhile, and let
// go only after it commits: every write of an older bee's Board holds the
// same lock shared while it checks the version and writes (see firstTrip),
// so none writes through a schema being changed.
func (b *Board) migrateLocked(ctx context.Context, start time.Time) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return b.fail(ctx, "migrate", err, time.Since(start))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return b.fail(ctx, "migrate", err, time.Since(start))
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock)
	}()
	v, err := b.readVersion(ctx, conn)
	if err != nil {
		return b.fail(ctx, "migrate", err, time.Since(start))
	}
	if v == schemaVersion {
		return nil // another process migrated meanwhile
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if v == 0 {
			if _, err := tx.Exec(ctx, `CREATE TABLE bee_schema_version (version integer NOT NULL)`); err != nil {
				return b.createErr(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO bee_schema_version (version) VALUES (0)`); err != nil {
				return err
			}
		}
		for next := v + 1; next <= schemaVersion; next++ {
			if _, err := tx.Exec(ctx, migrations[next]); err != nil {
				return fmt.Errorf("migrate to schema %d: %w", next, b.createErr(err))
			}
			if next == 1 {
				if _, err := tx.Exec(ctx, `INSERT INTO bee_meta (key, value) VALUES ('board_id', $1)`, newToken(4)); err != nil {
					return fmt.Errorf("migrate to schema 1: %w", err)
				}
			}
		}
		_, err := tx.Exec(ctx, `UPDATE bee_schema_version SET version = $1`, schemaVersion)
		return err
	})
	if err != nil {
		return b.fail(ctx, "migrate", err, time.Since(start))
	}
	b.created = v == 0
	b.log.Info("board schema migrated", logkey.SchemaFrom, v, logkey.SchemaTo, schemaVersion)
	return nil
}

// createErr says what to do when the role may not create the tables.
func (b *Board) createErr(err error) error {
	if isCode(err, "42501") { // insufficient_privilege
		return fmt.Errorf("the role may not create bee's tables (grant it CREATE on the schema for the first start, or let an owner start bee once): %w", err)
	}
	return err
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readVersion returns the database's schema version (0 for a database
// without bee's tables), refusing a newer one and one with bee's tables but
// no version.
func (b *Board) readVersion(ctx context.Context, q queryRower) (int, error) {
	var hasVersion, hasActions bool
	err := q.QueryRow(ctx, `SELECT to_regclass('bee_schema_version') IS NOT NULL, to_regclass('bee_actions') IS NOT NULL`).
		Scan(&hasVersion, &hasActions)
	if err != nil {
		return 0, err
	}
	if !hasVersion {
		if hasActions {
			return 0, fmt.Errorf("board %s: the database has a bee_actions table but no bee_schema_version; it is not a bee board: %w", b.location, ErrNotBoard)
		}
		return 0, nil
	}
	var v int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM bee_schema_version`).Scan(&v); err != nil {
		return 0, err
	}
	if v > schemaVersion {
		return 0, fmt.Errorf("board %s has schema version %d, but this bee understands only up to %d: upgrade bee on this machine: %w",
			b.location, v, schemaVersion, ErrNewerSchema)
	}
	return v, nil
}
