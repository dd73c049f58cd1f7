package pgboard

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tractat-us/bee/internal/pgtest"
)

// roleEnv, when set, makes the test binary run a worker role (see
// roles_test.go) instead of the tests.
const roleEnv = "BEE_PGBOARD_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	pgtest.StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
