package liveness

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAlive(t *testing.T) {
	t.Parallel()
	require.True(t, Alive(os.Getpid()))
	require.True(t, Alive(1), "init exists, though signalling it is refused")
	require.False(t, Alive(0))
	require.False(t, Alive(-1))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, cmd.Run())
	require.False(t, Alive(cmd.Process.Pid), "a process that has exited and been reaped")
}
