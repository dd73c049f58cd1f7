package ancestry

import (
	"context"
	"os"
	"strconv"
)

// When claude runs under another command name (a versioned binary run by
// its path, a wrapper), the name rule finds nothing, and /clear would do
// nothing without a word. Claude Code says who it is in the environment of
// what it starts, so each side has a fallback, used only when the name
// rule finds nothing:
//
//   - a hook has $CLAUDE_PID, the Claude process's pid: it counts when that
//     pid is one of the hook's ancestors;
//   - a bridge (an MCP server) has CLAUDECODE=1 and is a direct child of
//     claude: its parent counts.
//
// Both name the same process, so the bridge and the hook still agree.

// Environment variables Claude Code sets for what it starts.
const (
	// EnvClaudePID is set for hooks to the Claude process's pid.
	EnvClaudePID = "CLAUDE_PID"
	// EnvClaudeCode is "1" in the environment of everything Claude Code
	// starts, MCP servers among them.
	EnvClaudeCode = "CLAUDECODE"
)

// A Rule says how the agent process was found.
type Rule string

const (
	// ByName: the nearest ancestor Identify names a client (Nearest): by
	// its command name, or a node by the script it runs.
	ByName Rule = "command name"
	// ByClaudePID: $CLAUDE_PID named an ancestor (hooks).
	ByClaudePID Rule = "$" + EnvClaudePID
	// ByParent: the caller's parent, with CLAUDECODE=1 in the caller's
	// environment (bridges, which Claude Code starts directly).
	ByParent Rule = "parent with " + EnvClaudeCode + "=1"
)

// Hints are what the caller's environment says about its Claude process.
// A hook sets ClaudePID; a bridge sets ParentIsClaude. Never set
// ParentIsClaude for a hook: Claude Code runs hooks through sh, so a hook's
// parent is the shell.
type Hints struct {
	ClaudePID      int  // $CLAUDE_PID, 0 when unset or not a pid
	ParentIsClaude bool // the caller was started by Claude Code directly (CLAUDECODE=1)
}

// HookHints returns a hook's hints from its environment.
func HookHints(getenv func(string) string) Hints {
	pid, err := strconv.Atoi(getenv(EnvClaudePID))
	if err != nil || pid < 1 {
		pid = 0
	}
	return Hints{ClaudePID: pid}
}

// BridgeHints returns a bridge's hints from its environment.
func BridgeHints(getenv func(string) string) Hints {
	return Hints{ParentIsClaude: getenv(EnvClaudeCode) == "1"}
}

// A Found is the agent process a rule found: its pid, its command name as
// the chain has it, the client it is, and the rule. A zero Found (PID 0)
// means none. The fallbacks find only Claude Code.
type Found struct {
	PID    int
	Comm   string
	Client Client
	Rule   Rule
}

// Pick applies the name rule to chain (ordered from the caller's parent
// upward), then, when it finds nothing, the fallbacks h allows: a
// ClaudePID that is in chain, then the parent when ParentIsClaude. ok is
// false when none finds anything. Like Nearest it is pure.
func Pick(chain []Proc, h Hints) (f Found, ok bool) {
	for _, p := range chain {
		if c, ok := Identify(p); ok {
			return Found{PID: p.PID, Comm: p.Comm, Client: c, Rule: ByName}, true
		}
	}
	if h.ClaudePID > 0 {
		for _, p := range chain {
			if p.PID == h.ClaudePID {
				return Found{PID: p.PID, Comm: p.Comm, Client: Claude, Rule: ByClaudePID}, true
			}
		}
	}
	if h.ParentIsClaude && len(chain) > 0 && chain[0].PID > 1 {
		return Found{PID: chain[0].PID, Comm: chain[0].Comm, Client: Claude, Rule: ByParent}, true
	}
	return Found{}, false
}

// Find applies Pick to the Chain of the calling process. ok is false when
// no rule finds an agent process; err is non-nil only when the walk itself
// failed.
func Find(ctx context.Context, h Hints) (f Found, ok bool, err error) {
	// The name rule takes the nearest agent by name over any fallback, so
	// the walk can end there; the fallbacks see the whole chain when no
	// ancestor is named an agent.
	chain, err := chainUntil(ctx, os.Getpid(), func(p Proc) bool { _, ok := Identify(p); return ok })
	if err != nil {
		return Found{}, false, err
	}
	f, ok = Pick(chain, h)
	return f, ok, nil
}

// Comm returns the command name of process pid as `ps -o comm=` shows it.
func Comm(ctx context.Context, pid int) (string, error) {
	p, err := procOf(ctx, pid)
	return p.Comm, err
}

// Process reads process pid as Chain lists it (its command line only for
// a Node.js interpreter), for Identify.
func Process(ctx context.Context, pid int) (Proc, error) {
	return procOf(ctx, pid)
}
