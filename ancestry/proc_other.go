//go:build !linux

package ancestry

import (
	"context"
	"errors"
	"io/fs"

	"github.com/shirou/gopsutil/v4/process"
)

// procOf reads pid's parent and command name through gopsutil. The name is
// Process.Name, the nearest thing to `ps -o comm=` there is off Linux. For
// names of 15 bytes or more gopsutil may substitute the executable's
// basename, which can only matter for names longer than "claude.exe", so it
// never changes the rule's outcome. A Node.js interpreter's command line
// is read as well (Identify needs it).
func procOf(ctx context.Context, pid int) (Proc, error) {
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		return Proc{}, err
	}
	comm, err := p.NameWithContext(ctx)
	if err != nil {
		return Proc{}, err
	}
	ppid, err := p.PpidWithContext(ctx)
	if err != nil {
		return Proc{}, err
	}
	proc := Proc{PID: pid, PPID: int(ppid), Comm: comm}
	if IsInterpreter(comm) {
		if proc.Args, err = p.CmdlineSliceWithContext(ctx); err != nil {
			return Proc{}, err
		}
	}
	return proc, nil
}

// isGone reports whether err says the process does not exist (any more).
func isGone(err error) bool {
	return errors.Is(err, process.ErrorProcessNotRunning) || errors.Is(err, fs.ErrNotExist)
}
