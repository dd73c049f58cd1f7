package board

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// A schemaShape is what Open checks of a board's schema: the statement
// that made each table, index and view, by name, with comments and runs of
// whitespace taken out, so that formatting changes to a migration never
// make a board the older text made look damaged. Objects bee did not make
// (an index a person added, SQLite's statistics) are left out.
type schemaShape map[string]string

// readShape reads the shape of the tables, indexes and views that want names (or
// of all of them when want is nil).
func readShape(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, want schemaShape) (schemaShape, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, type || ' ' || coalesce(sql, '') FROM sqlite_schema
		WHERE type IN ('table', 'index', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	shape := schemaShape{}
	for rows.Next() {
		var name, stmt string
		if err := rows.Scan(&name, &stmt); err != nil {
			return nil, err
		}
		if _, ok := want[name]; want == nil || ok {
			shape[name] = normalizeSQL(stmt)
		}
	}
	return shape, rows.Err()
}

// normalizeSQL takes comments out of stmt and turns each run of whitespace
// into one space. (A quoted string holding "--" would lose its end; bee's
// schema holds none.)
func normalizeSQL(stmt string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(stmt, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte(' ')
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// checkSchema refuses, with ErrCorrupt, a board whose tables or indexes are
// not those this bee's migrations make (a damaged schema page, or a file
// edited by hand): the board's queries would fail on it with raw SQL
// errors.
func (b *Board) checkSchema() error {
	want := wantShape
	got, err := readShape(b.ctx, b.wconn, want)
	if err != nil {
		return corruptErr(b.path, "its schema cannot be read", err)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if got[name] != want[name] {
			if got[name] == "" {
				return corruptErr(b.path, fmt.Sprintf("it lacks bee's %s", name), nil)
			}
			return corruptErr(b.path, fmt.Sprintf("its %s is not the one this bee makes (%s)", name, got[name]), nil)
		}
	}
	return nil
}
