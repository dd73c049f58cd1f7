package pgboard

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pipeTx is a write transaction (see Board.attempt) that spends three
// round trips fewer than pgx's own: its BEGIN and its first trip (see
// Board.firstTrip) go to the server in one pipeline with its first
// statement, and the notifications it queues (see Board.notify) go with
// its COMMIT. A post or an end used to wait for a BEGIN of its own, for
// the first trip and for each NOTIFY before its commit; on a loaded
// machine each round trip is a wait for two processes to be scheduled, on
// the path from a post to its waiter's wake (issue 22).
//
// The first statement runs before its caller has seen the first trip's
// answer (the schema version): when that answer refuses the write, the
// statement's result is never handed out and the transaction rolls back,
// so nothing it did commits.
//
// The notifications are statements of the transaction all the same: they
// run inside it, before its COMMIT, so the watch lock's promise holds (see
// watchLock), and PostgreSQL delivers them only if it commits. One that
// fails aborts the transaction, which then does not commit.
//
// A pipeTx is not safe for concurrent use, as pgx's Tx is not. It holds
// its pool connection until Commit or Rollback, after which release gives
// it back (the pool drops a connection left inside a transaction).
type pipeTx struct {
	c      *pgxpool.Conn
	first  firstTrip // sent after BEGIN, with the first statement
	xid    int64     // the transaction's id, once the first trip answered
	begun  bool      // BEGIN has been sent: Commit or Rollback must end it
	closed bool      // Commit or Rollback has run
	notes  []note
}

// A note is a notification statement queued for the commit.
type note struct {
	sql  string
	args []any
}

var _ pgx.Tx = (*pipeTx)(nil)

// A firstTrip is what a transaction sends after its BEGIN, ahead of its
// first statement (see Board.firstTrip), and how to read the answers.
type firstTrip struct {
	batch *pgx.Batch
	// read reads batch's answers: the transaction's id, or an error that
	// refuses the write.
	read func(pgx.BatchResults) (xid int64, err error)
}

// newPipeTx is a transaction on c that sends first after its BEGIN.
func newPipeTx(c *pgxpool.Conn, first firstTrip) *pipeTx {
	return &pipeTx{c: c, first: first}
}

// lead sends b, with BEGIN and the first trip ahead of it when they have
// not been sent yet, and returns b's results.
func (t *pipeTx) lead(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.c.SendBatch(ctx, b)
	}
	t.begun = true
	q := &pgx.Batch{}
	q.Queue("BEGIN")
	q.QueuedQueries = append(q.QueuedQueries, t.first.batch.QueuedQueries...)
	q.QueuedQueries = append(q.QueuedQueries, b.QueuedQueries...)
	br := t.c.SendBatch(ctx, q)
	_, err := br.Exec()
	if err == nil {
		t.xid, err = t.first.read(br)
	}
	if err != nil {
		_ = br.Close()
		return errResults{err}
	}
	return br
}

// leadOne sends the statement sql, after BEGIN and the first trip when
// they have not been sent yet.
func (t *pipeTx) leadOne(ctx context.Context, sql string, args []any) (br pgx.BatchResults, led bool) {
	if t.begun {
		return nil, false
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.lead(ctx, b), true
}

// notify queues a notification statement for the commit.
func (t *pipeTx) notify(sql string, args ...any) {
	t.notes = append(t.notes, note{sql, args})
}

// Commit sends the queued notifications and COMMIT in one round trip. An
// error of a notification is the server's answer: nothing committed.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun && len(t.notes) == 0 {
		return nil // nothing was sent: there is nothing to commit
	}
	b := &pgx.Batch{}
	for _, n := range t.notes {
		b.Queue(n.sql, n.args...)
	}
	b.Queue("COMMIT")
	br := t.lead(ctx, b)
	var err error
	for range t.notes {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		var pe *pgconn.PgError
		if (errors.As(err, &pe) || isSentinel(err)) && t.c.Conn().PgConn().TxStatus() != 'I' {
			// A notification failed, or the first trip refused the
			// write: the transaction is not ended; end it, so that the
			// connection can be used again.
			t.closed = false
			_ = t.Rollback(ctx)
		}
		return err
	case tag.String() == "ROLLBACK":
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback ends the transaction without committing; a connection whose
// rollback fails is closed.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	if _, err := t.c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = t.c.Conn().Close(ctx)
		return err
	}
	return nil
}

// release gives the connection back to the pool.
func (t *pipeTx) release() { t.c.Release() }

// Begin is not used by the board: a nested transaction would need a
// savepoint of its own.
func (t *pipeTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pgboard: nested transactions are not supported")
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.c.CopyFrom(ctx, table, cols, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.lead(ctx, b)
}

// LargeObjects is not used by the board: its zero value, which fails.
func (t *pipeTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.c.Conn().Prepare(ctx, name, sql)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, led := t.leadOne(ctx, sql, args)
	if !led {
		return t.c.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, led := t.leadOne(ctx, sql, args)
	if !led {
		return t.c.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &ledRows{Rows: rows, br: br}, nil
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, led := t.leadOne(ctx, sql, args)
	if !led {
		return t.c.QueryRow(ctx, sql, args...)
	}
	return ledRow{br}
}

func (t *pipeTx) Conn() *pgx.Conn { return t.c.Conn() }

// ledRows are the rows of a statement sent with the first trip: closing
// them ends the pipeline, after which the connection takes the next
// statement.
type ledRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // of ending the pipeline
}

func (r *ledRows) Close() {
	if r.br == nil {
		return
	}
	r.Rows.Close()
	r.err = r.br.Close()
	r.br = nil
}

func (r *ledRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// ledRow is the row of a statement sent with the first trip (see ledRows).
type ledRow struct{ br pgx.BatchResults }

func (r ledRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errResults is a batch's results that all report err.
type errResults struct{ err error }

func (e errResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errResults) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errResults) QueryRow() pgx.Row                { return errRow(e) }
func (e errResults) Close() error                     { return e.err }
func (e errResults) Tx() pgx.Tx                       { return nil }

type errRow errResults

func (e errRow) Scan(...any) error { return e.err }
