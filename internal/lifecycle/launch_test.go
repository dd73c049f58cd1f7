package lifecycle

import (
	"bufio"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLaunch_Differences(t *testing.T) {
	a := launch{exe: "/bin/bee-mcp", args: []string{"bee-mcp"}, env: serverEnv([]string{"PATH=/bin", "BEE_AGENT=x", "HOME=/h"})}
	require.Equal(t, []string{"BEE_AGENT=x"}, a.env, "only what tells server entries apart")
	require.True(t, a.equal(a))
	b := a
	b.env = serverEnv([]string{"BEE_AGENT=x", "CLAUDE_PLUGIN_ROOT=/p", "BEE_BOARD=postgres://u:secret@h/db"})
	require.False(t, a.equal(b))
	d := a.differences(b)
	require.Equal(t, "BEE_BOARD, CLAUDE_PLUGIN_ROOT", d)
	require.NotContains(t, d, "secret", "values never show")
	c := a
	c.args = []string{"/abs/bee-mcp"}
	require.Equal(t, "arguments", a.differences(c))
}

// runAsEnv makes the test binary wait for its stdin to close and exit (see
// TestMain). It is not a BEE_ variable, which would make the launch differ.
const runAsEnv = "LIFECYCLE_TEST_RUN_AS"

// A process launched the same way is not a sibling; one with another
// plugin root is.
func TestSibling(t *testing.T) {
	same := exec.Command(os.Args[0], os.Args[1:]...)
	same.Env = os.Environ()
	other := exec.Command(os.Args[0], os.Args[1:]...)
	other.Env = append(os.Environ(), "CLAUDE_PLUGIN_ROOT=/elsewhere")
	for _, tc := range []struct {
		cmd  *exec.Cmd
		want bool
	}{{same, false}, {other, true}} {
		tc.cmd.Env = append(tc.cmd.Env, runAsEnv+"=wait-for-stdin")
		stdin, err := tc.cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := tc.cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, tc.cmd.Start())
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", line)
		sib, diff, err := sibling(tc.cmd.Process.Pid)
		stdin.Close()
		require.NoError(t, tc.cmd.Wait())
		require.NoError(t, err)
		require.Equal(t, tc.want, sib, "differences: %s", diff)
	}
}
