package board

import (
	"testing"

	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/testtime"
)

func TestMain(m *testing.M) {
	// Multi-process tests and benchmarks re-execute the test binary as a
	// worker role (see roles_test.go), as os/exec's tests do.
	boardtest.RunRole(openRole, moreRoles)
	testtime.VerifyTestMain(m)
}
