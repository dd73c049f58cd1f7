package board

import (
	"os"

	"github.com/tractat-us/bee/actions/boardtest"
)

// Worker roles: multi-process tests and benchmarks re-execute the test
// binary as a role (boardtest.RunRole), the shared ones or this board's own
// (roles_hardening_test.go). Besides boardtest's environment a role here
// reads:
//
//	BEE_BOARD_TEST_SAFETY   Options.SafetyPoll in ms (0: default)
//	BEE_BOARD_TEST_NOLOCK   "1": Options.noWriteLock
const (
	envSafety = "BEE_BOARD_TEST_SAFETY"
	envNoLock = "BEE_BOARD_TEST_NOLOCK"
)

// openRole opens the Board a role runs on, with the options its
// environment asks for.
func openRole(role, path string, out *boardtest.Out) (*Board, error) {
	opts := &Options{
		Lease:       boardtest.EnvMillis(boardtest.EnvLease),
		SafetyPoll:  boardtest.EnvMillis(envSafety),
		noWriteLock: os.Getenv(envNoLock) == "1",
	}
	if role == "waiter" {
		opts.beforeSleep = func() { out.Say("sleeping") }
	}
	if setup := roleOptions[role]; setup != nil {
		setup(opts, out)
	}
	return Open(path, opts)
}
