package liveness

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// The Watch's answers are Alive's: this process and init live, a pid
// below 1 and a reaped child do not, a zombie does not, and a child that
// exits while watched turns dead at the next question.
func TestWatch(t *testing.T) {
	t.Parallel()
	var w Watch
	defer w.Close()
	done := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, done.Run())
	require.Equal(t, []bool{true, true, false, false, false}, w.Alive([]int{os.Getpid(), 1, 0, -1, done.Process.Pid}))

	child := exec.Command("sleep", "60")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	pid := child.Process.Pid
	require.Equal(t, []bool{true, true}, w.Alive([]int{pid, os.Getpid()}))
	require.NoError(t, child.Process.Kill())
	require.Eventually(t, func() bool { return !w.Alive([]int{pid, os.Getpid()})[0] }, testtime.Bound(10*time.Second), time.Millisecond,
		"a killed child, not yet reaped (a zombie), is dead")
	require.Equal(t, []bool{false, true}, w.Alive([]int{pid, os.Getpid()}), "and stays dead")
	_ = child.Wait() // signal: killed
	require.Equal(t, []bool{false}, w.Alive([]int{pid}), "reaped")
}

// The Watch holds a descriptor per process it was last asked about, no
// more: those it is no longer asked about, and all at Close, are freed.
func TestWatch_Forgets(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux's Watch holds descriptors")
	}
	var children []int
	for range 3 {
		c := exec.Command("sleep", "60")
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		children = append(children, c.Process.Pid)
	}
	before := openFDs(t)
	var w Watch
	require.Equal(t, []bool{true, true, true}, w.Alive(children))
	require.Equal(t, before+3, openFDs(t))
	require.Equal(t, []bool{true}, w.Alive(children[1:2]))
	require.Equal(t, before+1, openFDs(t), "the other two are forgotten")
	w.Close()
	require.Equal(t, before, openFDs(t))
	require.Equal(t, []bool{true, false}, w.Alive([]int{children[0], 0}), "a closed Watch asks Alive")
	require.Equal(t, before, openFDs(t))
}

// openFDs is the number of this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(strings.TrimSpace(e.Name())); err == nil {
			n++
		}
	}
	return n
}

// The reap's question about the members of a machine, asked of Alive one
// by one and of a Watch: n processes per question.
func BenchmarkAlive(b *testing.B) {
	pids := make([]int, 32)
	for i := range pids {
		c := exec.Command("sleep", "60")
		require.NoError(b, c.Start())
		b.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		pids[i] = c.Process.Pid
	}
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("each-%d", n), func(b *testing.B) {
			for b.Loop() {
				for _, alive := range each(pids[:n]) {
					require.True(b, alive)
				}
			}
		})
		b.Run(fmt.Sprintf("watch-%d", n), func(b *testing.B) {
			var w Watch
			defer w.Close()
			for b.Loop() {
				for _, alive := range w.Alive(pids[:n]) {
					require.True(b, alive)
				}
			}
		})
	}
}
