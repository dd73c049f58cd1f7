// Package liveness answers one question about a process by its pid: does it
// still exist? bee asks it of bridges (is a member's process alive), of the
// Claude process (has the session ended) and of the bridge a hook talks to.
package liveness

import (
	"errors"
	"syscall"
)

// Alive reports whether process pid exists: signal 0 succeeds, or fails
// with EPERM (the process exists but belongs to someone else). A pid below
// 1 is never alive. A pid may be reused once its process is gone; callers
// that must tell a new process from an old one compare start times or
// tokens as well.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
