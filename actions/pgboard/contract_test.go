package pgboard

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// openTest opens a board at location (a new database of the shared test
// server when "") and closes it when the test ends.
func openTest(t testing.TB, location string, opts *Options) *Board {
	t.Helper()
	if location == "" {
		c := pgtest.Shared(t)
		location = c.URL(c.NewDB(t))
	}
	b, err := Open(location, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// The contract suite every board runs, on databases of a PostgreSQL server,
// serially (see boardtest.RunParallel), and not beside this package's other
// tests, which are parallel.
func TestContract(t *testing.T) {
	boardtest.Run(t, func(t *testing.T, location string, o boardtest.Options) actions.Board {
		return openTest(t, location, &Options{Lease: o.Lease, Renew: o.Renew, SafetyPoll: o.SafetyPoll, PageSize: o.PageSize, Clock: o.Clock})
	})
}
