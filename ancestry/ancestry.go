// Package ancestry owns the nearest-claude-ancestor rule, the one
// implementation both bee-mcp and bee-hook call, so the bridge and the hook
// can never disagree about which Claude process they belong to.
//
// The rule: walk up from the caller's parent; the first process whose
// command name (the comm that `ps -o comm=` shows, which may hold spaces) is
// exactly "claude" or "claude.exe" is the Claude process. The comparison is
// exact and case-sensitive: "Claude", "claude code" and "claude-foo" do not
// count.
//
// The rule itself ([Nearest]) is pure and takes the ancestor listing as an
// argument, so tests can feed it any tree; [Chain] does the process walk and
// [ClaudePID] puts the two together. Having no Claude ancestor is a normal
// outcome (ok is false), never an error.
//
// When claude runs under another name, [Pick] and [Find] fall back on what
// Claude Code puts in the environment: $CLAUDE_PID for a hook, the parent
// of a bridge started with CLAUDECODE=1. Both still name the same process;
// the [Found] they return says which rule did, so callers can warn.
package ancestry

import (
	"context"
	"fmt"
	"os"
)

// A Proc is one process in an ancestor listing.
type Proc struct {
	PID  int
	PPID int
	// Comm is the command name as `ps -o comm=` shows it: on Linux the
	// kernel's comm, the basename of the executed file truncated to 15
	// bytes. It may hold spaces.
	Comm string
}

// MaxDepth bounds how many ancestors [Chain] lists.
const MaxDepth = 64

// IsClaude reports whether comm names a Claude process: exactly "claude",
// or "claude.exe" (the comm of the npm package's binary when it is run
// directly).
func IsClaude(comm string) bool {
	return comm == "claude" || comm == "claude.exe"
}

// Nearest returns the PID of the first proc in chain (ordered from the
// caller's parent upward) whose Comm satisfies [IsClaude]. ok is false when
// there is none, which is a normal outcome, not an error.
func Nearest(chain []Proc) (pid int, ok bool) {
	for _, p := range chain {
		if IsClaude(p.Comm) {
			return p.PID, true
		}
	}
	return 0, false
}

// Chain lists pid's ancestors, from its parent upward. It includes pid 1 if
// the walk reaches it and stops there (or at a parent PID of 0), at an
// ancestor that no longer exists (it exited while being walked), at a PID it
// has already listed, or after [MaxDepth] entries; none of these is an
// error. It fails when pid itself cannot be read, when an ancestor cannot be
// read for another reason (for example permissions), or when ctx is done.
func Chain(ctx context.Context, pid int) ([]Proc, error) {
	return chainUntil(ctx, pid, nil)
}

// chainUntil is Chain that also stops after the first ancestor for which
// stop is true (stop nil: never).
func chainUntil(ctx context.Context, pid int, stop func(Proc) bool) ([]Proc, error) {
	self, err := procOf(ctx, pid)
	if err != nil {
		return nil, fmt.Errorf("ancestry: reading process %d: %w", pid, err)
	}
	var chain []Proc
	seen := map[int]bool{pid: true}
	for cur := self.PPID; cur > 0 && !seen[cur] && len(chain) < MaxDepth; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ancestry: walking ancestors of %d: %w", pid, err)
		}
		seen[cur] = true
		p, err := procOf(ctx, cur)
		if isGone(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ancestry: reading ancestor %d of %d: %w", cur, pid, err)
		}
		chain = append(chain, p)
		if cur == 1 || (stop != nil && stop(p)) {
			break
		}
		cur = p.PPID
	}
	return chain, nil
}

// ClaudePID applies [Nearest] to [Chain] of the calling process. ok is false
// when no ancestor is a Claude process; err is non-nil only when the walk
// itself failed.
func ClaudePID(ctx context.Context) (pid int, ok bool, err error) {
	chain, err := Chain(ctx, os.Getpid())
	if err != nil {
		return 0, false, err
	}
	pid, ok = Nearest(chain)
	return pid, ok, nil
}
