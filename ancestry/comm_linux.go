package ancestry

import (
	"context"
	"os"
	"strconv"
	"strings"
)

// commOf returns pid's comm as `ps -o comm=` shows it.
//
// It reads /proc/<pid>/comm instead of calling gopsutil's Process.Name: for
// a comm of 15 bytes or more (the kernel's limit, so possibly truncated)
// Name swaps in the basename of the process's argv[0] when that starts with
// the comm, so it can differ from what ps shows, and the rule is defined by
// what ps shows.
func commOf(_ context.Context, pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
