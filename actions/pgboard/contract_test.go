package pgboard

import (
	"os"
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
// serially (see boardtest.RunParallel). Its cases read the server's
// snapshot horizon, which other tests' transactions hold back, so it runs
// on a cluster of its own, beside this package's other tests; on the
// server $BEE_TEST_POSTGRES names it runs alone, before them.
func TestContract(t *testing.T) {
	pgtest.SkipShort(t)
	var c *pgtest.Cluster
	if os.Getenv(pgtest.EnvURL) == "" {
		t.Parallel()
		var err error
		if c, err = pgtest.Start(nil); err != nil {
			pgtest.Unavailable(t, err)
		}
		t.Cleanup(func() { require.NoError(t, c.Stop()) })
	} else {
		c = pgtest.Shared(t)
	}
	boardtest.Run(t, func(t *testing.T, location string, o boardtest.Options) actions.Board {
		if location == "" {
			location = c.URL(c.NewDB(t))
		}
		return openTest(t, location, &Options{Lease: o.Lease, Renew: o.Renew, SafetyPoll: o.SafetyPoll, PageSize: o.PageSize, Clock: o.Clock})
	})
}
