package bridgetest

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tractat-us/bee/internal/testbin"
)

// The stand-in claude trick: a test package takes the real bee-mcp and
// bee-hook (built once for every test that runs them, by testbin), puts
// them beside a copy of its own test binary named "claude", and starts
// that copy with StandInEnv set; the copy's TestMain sees it and plays
// Claude Code's part (the bridge's parent, the hooks' runner) instead of
// running tests.

// StandInEnv is the one variable that tells a re-run test binary it is a
// stand-in claude. Its value is a StandIn as JSON.
const StandInEnv = "BEE_TEST_STAND_IN"

// A StandIn is what a stand-in claude is told.
type StandIn struct {
	// Bin is the directory bee-mcp and bee-hook were built into.
	Bin string `json:"bin"`
	// ExitFile, if set, is where the stand-in reports how its bridge
	// ended.
	ExitFile string `json:"exitFile,omitempty"`
}

// Env returns the StandInEnv=... entry that makes a test binary s.
func (s StandIn) Env() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // two strings always encode
	}
	return StandInEnv + "=" + string(b)
}

// StandInFromEnv returns the StandIn this process was started as, and false
// when it was not started as one (it runs tests).
func StandInFromEnv() (StandIn, bool) {
	v, ok := os.LookupEnv(StandInEnv)
	if !ok {
		return StandIn{}, false
	}
	var s StandIn
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		fmt.Fprintf(os.Stderr, "stand-in claude: %s=%q: %v\n", StandInEnv, v, err)
		os.Exit(2)
	}
	return s, true
}

// Main is the TestMain of a package whose tests run a stand-in claude: in
// a test binary started as one (StandInFromEnv) it plays claude's part
// with play and exits with its code; otherwise it sets *bin up
// (RunWithClaude), runs the tests and exits. It never returns.
func Main(m *testing.M, bin *string, play func(StandIn) int, aliases ...string) {
	if si, ok := StandInFromEnv(); ok {
		os.Exit(play(si))
	}
	os.Exit(RunWithClaude(m, bin, aliases...))
}

// RunWithClaude makes a temporary directory holding bee-mcp and bee-hook
// (links to testbin's build) and a copy of the test binary as "claude"
// (and a link to it under each of aliases, for a claude run under another
// command name), sets *bin to it, runs the tests and removes the
// directory. Under -short it builds nothing and leaves *bin empty: the
// package's tests skip (testbin.SkipShort) before they use it. It returns
// the exit code for TestMain to pass to os.Exit.
func RunWithClaude(m *testing.M, bin *string, aliases ...string) int {
	if !flag.Parsed() {
		flag.Parse() // for testing.Short; m.Run parses no further
	}
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "bee-claude-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setUpClaude(dir, aliases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*bin = dir
	return m.Run()
}

func setUpClaude(dir string, aliases []string) error {
	built, err := testbin.CommandsDir()
	if err != nil {
		return err
	}
	for _, name := range []string{"bee-mcp", "bee-hook"} {
		if err := os.Symlink(filepath.Join(built, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "claude"), self, 0o755)
	}
	for _, a := range aliases {
		if err == nil {
			err = os.Symlink("claude", filepath.Join(dir, a))
		}
	}
	if err != nil {
		return fmt.Errorf("copy the test binary as claude: %w", err)
	}
	return nil
}
