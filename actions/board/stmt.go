package board

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Statements run with a context that is never cancelled (see quiet): a
// cancellable context makes the driver start a goroutine per statement to
// interrupt it, and database/sql one per result set, which costs more than
// the board's short statements themselves. The waits that can be long are
// bounded otherwise: the write lock and BEGIN IMMEDIATE honour the caller's
// context, statements inside a write transaction never wait for a lock,
// and a read waits (rarely, during WAL recovery) at most the busy timeout.

// quiet returns ctx's values without its cancellation.
func quiet(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// A stmtCache keeps statements prepared: parsing SQL costs about as much
// as running the board's short statements.
type stmtCache struct {
	mu      sync.Mutex // guards m and prepared
	m       map[string]*sql.Stmt
	prepare func(ctx context.Context, query string) (*sql.Stmt, error)
	// prepared counts the statements prepared, for tests.
	prepared int
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.prepare(ctx, query)
	if err != nil {
		return nil, err
	}
	c.prepared++
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.m {
		errs = append(errs, st.Close())
	}
	c.m = nil
	return errors.Join(errs...)
}

// errScanner is a row whose Scan reports err.
type errScanner struct{ err error }

func (e errScanner) Scan(...any) error { return e.err }

// row runs a read expected to return one row, on the pool.
func (b *Board) row(ctx context.Context, query string, args ...any) scanner {
	st, err := b.rstmts.get(ctx, query)
	if err != nil {
		return errScanner{err}
	}
	return st.QueryRowContext(quiet(ctx), args...)
}

// rows runs a read on the pool.
func (b *Board) rows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := b.rstmts.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(quiet(ctx), args...)
}

// A wtx is the write transaction open on the Board's write connection; its
// methods may be called only inside Board.write.
type wtx struct {
	b   *Board
	ctx context.Context // never cancelled
}

func (t wtx) row(query string, args ...any) scanner {
	st, err := t.b.wstmts.get(t.ctx, query)
	if err != nil {
		return errScanner{err}
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t wtx) rows(query string, args ...any) (*sql.Rows, error) {
	st, err := t.b.wstmts.get(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

func (t wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.b.wstmts.get(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

// script runs SQL that may hold several statements, unprepared.
func (t wtx) script(query string, args ...any) error {
	_, err := t.b.wconn.ExecContext(t.ctx, query, args...)
	return err
}
