//go:build !unix

package hooks

import "github.com/shirou/gopsutil/v4/process"

// Alive reports whether process pid exists. A pid below 1 is never alive.
// It is what Run uses when Config.Alive is nil.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	ok, err := process.PidExists(int32(pid))
	return err == nil && ok
}
