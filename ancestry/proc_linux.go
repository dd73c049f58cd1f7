package ancestry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procOf reads pid's parent and comm from /proc/<pid>/stat in one read.
//
// The comm is the kernel's, as `ps -o comm=` shows it: gopsutil's
// Process.Name swaps in the basename of argv[0] for a comm of 15 bytes or
// more, and the rule is defined by what ps shows. Reading /proc directly
// also spares a bridge gopsutil's start-up work (each NewProcess reads the
// process's start time, and the first one probes for virtualization),
// which costs more than the walk itself.
//
// The command line is read too for a Node.js interpreter, and only then:
// Identify needs it there, and every other process is told by its comm.
func procOf(_ context.Context, pid int) (Proc, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Proc{}, err
	}
	p, err := parseStat(pid, string(b))
	if err != nil || !IsInterpreter(p.Comm) {
		return p, err
	}
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return Proc{}, err
	}
	p.Args = parseCmdline(cmdline)
	return p, nil
}

// parseCmdline splits /proc/<pid>/cmdline, NUL-separated arguments with a
// trailing NUL, into its arguments.
func parseCmdline(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// parseStat parses a /proc/<pid>/stat line: "pid (comm) state ppid ...".
// The comm may hold spaces and parentheses, so it runs from the first "("
// to the last ")".
func parseStat(pid int, stat string) (Proc, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Proc{}, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, stat)
	}
	rest := strings.Fields(stat[end+1:])
	if len(rest) < 2 {
		return Proc{}, fmt.Errorf("/proc/%d/stat: no parent in %q", pid, stat)
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: parent %q: %w", pid, rest[1], err)
	}
	return Proc{PID: pid, PPID: ppid, Comm: stat[open+1 : end]}, nil
}

// isGone reports whether err says the process does not exist (any more):
// its /proc entry is gone, or it was reaped while being read.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
