package board

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// roleEnv, when set, makes the test binary run a worker role (see
// roles_test.go) instead of the tests: multi-process tests and benchmarks
// re-execute the test binary, as os/exec's tests do.
const roleEnv = "BEE_BOARD_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
