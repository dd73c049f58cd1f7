package board

import (
	"path/filepath"
	"testing"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
)

// The contract suite every board runs, on board files, a file each, in
// parallel.
func TestContract(t *testing.T) {
	boardtest.RunParallel(t, func(t *testing.T, location string, o boardtest.Options) actions.Board {
		if location == "" {
			location = filepath.Join(t.TempDir(), "board.db")
		}
		return openTest(t, location, &Options{Lease: o.Lease, Renew: o.Renew, SafetyPoll: o.SafetyPoll, PageSize: o.PageSize, Clock: o.Clock})
	})
}
