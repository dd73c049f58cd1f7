// Package liveness answers one question about a process by its pid: does it
// still exist? bee asks it of bridges (is a member's process alive), of the
// Claude process (has the session ended) and of the bridge a hook talks to.
//
// A process that has exited but not been reaped (a zombie: its parent is
// slow to wait for it, as a killed claude's can be) is gone: it runs no
// code and will never act again, though signal 0 still finds it.
package liveness

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Alive reports whether process pid exists and has not exited: signal 0
// succeeds, or fails with EPERM (the process exists but belongs to someone
// else), and where /proc tells (Linux), the process is not a zombie. A pid
// below 1 is never alive. A pid may be reused once its process is gone;
// callers that must tell a new process from an old one compare start times
// or tokens as well.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !exited(pid)
}

// exited reports whether /proc/<pid>/stat shows the process as a zombie
// (Z) or dead (X). Where /proc cannot be read, it reports false: signal 0
// has the last word.
func exited(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses, so the
	// state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}
