package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/testtime"
)

// startSleeper starts a child that runs until killed, and kills and
// reaps it at the test's end (when the test has not).
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// A procWatch says what liveness.Alive says of each pid: a running
// process is alive; one that has exited is not, while it is a zombie
// (its parent has not waited for it) and once reaped; a pid no process
// has is not; and it says so for every pid asked, duplicates too.
func TestProcWatch_AnswersAsLiveness(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: zombies cannot be told here")
	}
	w := newProcWatch()
	t.Cleanup(w.close)

	running, dying := startSleeper(t), startSleeper(t)
	pr, pd := running.Process.Pid, dying.Process.Pid
	require.Equal(t, []bool{true, true, true, false, false}, w.alive([]int{pr, pd, pr, 0, -1}))

	require.NoError(t, dying.Process.Signal(syscall.SIGKILL))
	require.Eventually(t, func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pd) + "/stat")
		return err == nil && strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')'):]), ") Z ")
	}, testtime.Bound(10*time.Second), time.Millisecond, "the child exits and stays unreaped")
	require.False(t, liveness.Alive(pd))
	require.Equal(t, []bool{true, false, true}, w.alive([]int{pr, pd, pr}), "a zombie is gone")
	require.Error(t, dying.Wait(), "killed")
	require.Equal(t, []bool{false, true}, w.alive([]int{pd, pr}), "a reaped process is gone")
}

// A procWatch keeps a pidfd only for the pids it was last asked about,
// and none once closed, after which it still answers.
func TestProcWatch_ClosesItsPidfds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pidfds are Linux's")
	}
	// Not parallel: it counts this process's open files.
	w := newProcWatch()
	a, b := startSleeper(t), startSleeper(t)
	pa, pb := a.Process.Pid, b.Process.Pid
	open := func() int {
		t.Helper()
		fds, err := filepath.Glob("/proc/self/fd/*")
		require.NoError(t, err)
		return len(fds)
	}
	base := open()
	require.Equal(t, []bool{true, true}, w.alive([]int{pa, pb}))
	require.Equal(t, base+2, open(), "one pidfd per process")
	require.Equal(t, []bool{true, true, true}, w.alive([]int{pb, pa, pb}))
	require.Equal(t, base+2, open(), "asking again opens none")
	require.Equal(t, []bool{true}, w.alive([]int{pb}))
	require.Equal(t, base+1, open(), "a pid no longer asked about has its pidfd closed")

	w.close()
	require.Equal(t, base, open(), "closing closes them all")
	require.Equal(t, []bool{true, true}, w.alive([]int{pa, pb}), "it still answers")
	require.Equal(t, base, open())
}
