package liveness

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
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

// A process that has exited but that its parent has not reaped yet (a
// zombie, which signal 0 still finds) is not alive: a killed claude whose
// parent is slow to wait for it has ended its session.
func TestAlive_Zombie(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: zombies cannot be told here")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	require.Eventually(t, func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')'):]), ") Z ")
	}, testtime.Bound(10*time.Second), time.Millisecond, "the child exits and stays unreaped")
	require.False(t, Alive(pid), "a zombie is gone")
}
