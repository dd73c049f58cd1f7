//go:build !linux

package ancestry

import (
	"context"

	"github.com/shirou/gopsutil/v4/process"
)

// commOf returns pid's command name from gopsutil's Process.Name, the
// nearest thing to `ps -o comm=` there is off Linux. For names of 15 bytes
// or more gopsutil may substitute the executable's basename, which can only
// matter for names longer than "claude.exe", so it never changes the rule's
// outcome.
func commOf(ctx context.Context, pid int) (string, error) {
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return "", err
	}
	return p.NameWithContext(ctx)
}
