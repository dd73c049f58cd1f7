//go:build !unix

package hooks

import "github.com/shirou/gopsutil/v4/process"

// alive reports whether process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	ok, err := process.PidExists(int32(pid))
	return err == nil && ok
}
