//go:build unix

package hooks

import (
	"errors"
	"syscall"
)

// Alive reports whether process pid exists: signal 0 succeeds, or fails
// with EPERM (the process exists but belongs to someone else). A pid below
// 1 is never alive. It is what Run uses when Config.Alive is nil.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
