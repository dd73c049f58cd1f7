package bridgetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The stand-in claude trick: a test package builds the real bee-mcp and
// bee-hook, copies its own test binary next to them as "claude", and starts
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
// with play and exits with its code; otherwise it builds the binaries into
// *bin (RunWithClaude), runs the tests and exits. It never returns.
func Main(m *testing.M, bin *string, play func(StandIn) int, aliases ...string) {
	if si, ok := StandInFromEnv(); ok {
		os.Exit(play(si))
	}
	os.Exit(RunWithClaude(m, bin, aliases...))
}

// RunWithClaude builds bee-mcp and bee-hook into a temporary directory,
// copies the test binary there as "claude" (and links each of aliases to
// it, for a claude run under another command name), sets *bin to the
// directory, runs the tests and removes the directory. It returns the exit
// code for TestMain to pass to os.Exit.
func RunWithClaude(m *testing.M, bin *string, aliases ...string) int {
	dir, err := os.MkdirTemp("", "bee-claude-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildClaude(dir, aliases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*bin = dir
	return m.Run()
}

func buildClaude(dir string, aliases []string) error {
	// One go build links both at once.
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"github.com/tractat-us/bee/cmd/bee-mcp", "github.com/tractat-us/bee/cmd/bee-hook")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build bee-mcp and bee-hook: %w", err)
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
