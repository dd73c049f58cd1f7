package pgboard

import (
	"testing"

	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

func TestMain(m *testing.M) {
	// Multi-process tests re-execute the test binary as a worker role (see
	// roles_test.go).
	boardtest.RunRole(openRole, map[string]boardtest.Role[*Board]{"machine-claimer": roleMachineClaimer})
	pgtest.Main(m) // stops the PostgreSQL cluster a test may have started
}
