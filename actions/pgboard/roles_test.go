package pgboard

import (
	"os"
	"time"

	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// Worker roles: multi-process tests re-execute the test binary as one of
// boardtest's shared roles (boardtest.RunRole). Besides boardtest's
// environment a role here reads
//
//	BEE_PGBOARD_TEST_HOST   Options.hostKey: the "machine" it runs on
const envHost = "BEE_PGBOARD_TEST_HOST"

// openRole opens the Board a role runs on, with the options its
// environment asks for; its safety poll is long, so that only NOTIFY wakes
// it soon.
func openRole(role, url string, out *boardtest.Out) (*Board, error) {
	opts := &Options{Lease: boardtest.EnvMillis(boardtest.EnvLease), hostKey: os.Getenv(envHost), SafetyPoll: testtime.Bound(30 * time.Second)}
	switch role {
	case "waiter":
		opts.beforeSleep = func() { out.Say("sleeping") }
	case "machine-claimer":
		machineRoleOptions(opts, out)
	}
	return Open(url, opts)
}
