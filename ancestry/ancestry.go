// Package ancestry owns the nearest-agent-ancestor rule, the one
// implementation both bee-mcp and bee-hook call, so the bridge and the hook
// can never disagree about which agent process (Claude Code, Codex CLI or
// Gemini CLI) they belong to.
//
// The rule: walk up from the caller's parent; the first process that
// [Identify] names a client is the agent process. A process is named by its
// command name (the comm that `ps -o comm=` shows, which may hold spaces),
// compared exactly and case-sensitively: "claude" or "claude.exe" is Claude
// Code, "codex" is Codex CLI, "gemini" is Gemini CLI; "Claude", "claude
// code" and "codex-foo" are nothing. A Node.js interpreter (comm "node" or
// "nodejs") is named by the script it runs, since that is how the npm
// packages start: `node .../bin/gemini` is Gemini CLI (whose launcher
// starts a second node of the same command line, the nearer one and so the
// one found), `node .../bin/codex` is Codex CLI's launcher (whose native
// codex child is the nearer one); a node running anything else is nothing,
// so an interpreter between the agent and the caller never takes its
// place.
//
// The rule itself ([Nearest], [Identify]) is pure and takes the ancestor
// listing as an argument, so tests can feed it any tree; [Chain] does the
// process walk and [AgentPID] puts the two together. Having no agent
// ancestor is a normal outcome (ok is false), never an error.
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
	"path"
	"strings"
)

// A Client is a coding-agent CLI the rule recognises.
type Client string

// The clients the rule knows.
const (
	Claude Client = "claude" // Claude Code
	Codex  Client = "codex"  // OpenAI Codex CLI
	Gemini Client = "gemini" // Google Gemini CLI
)

// OwnsSession reports whether one process of c serves exactly one session,
// so that what is keyed by its pid (a run file) names one session. Codex
// CLI's interactive TUI hands its sessions to an app-server daemon that one
// CODEX_HOME shares between every TUI, and the daemon starts each session's
// MCP servers and hooks (measured with Codex CLI 0.171.0), so a Codex
// process may serve several sessions at once.
func (c Client) OwnsSession() bool { return c == Claude || c == Gemini }

// Title is c's name as people know it ("Codex CLI"); "" for a client the
// rule does not know.
func (c Client) Title() string {
	switch c {
	case Claude:
		return "Claude Code"
	case Codex:
		return "Codex CLI"
	case Gemini:
		return "Gemini CLI"
	}
	return ""
}

// A Proc is one process in an ancestor listing.
type Proc struct {
	PID  int
	PPID int
	// Comm is the command name as `ps -o comm=` shows it: on Linux the
	// kernel's comm, the basename of the executed file truncated to 15
	// bytes. It may hold spaces.
	Comm string
	// Args is the command line, read only for a Node.js interpreter
	// (IsInterpreter), whose comm says nothing about what it runs; nil
	// otherwise.
	Args []string
}

// MaxDepth bounds how many ancestors [Chain] lists.
const MaxDepth = 64

// IsClaude reports whether comm names a Claude process: exactly "claude",
// or "claude.exe" (the comm of the npm package's binary when it is run
// directly).
func IsClaude(comm string) bool {
	return comm == "claude" || comm == "claude.exe"
}

// IsInterpreter reports whether comm is a Node.js interpreter, whose
// command line [Identify] reads to tell what it runs.
func IsInterpreter(comm string) bool {
	return comm == "node" || comm == "nodejs"
}

// Identify names the client p is, if any: by its command name, or for a
// Node.js interpreter by the script in its command line (see the package
// comment).
func Identify(p Proc) (Client, bool) {
	switch {
	case IsClaude(p.Comm):
		return Claude, true
	case p.Comm == "codex":
		return Codex, true
	case p.Comm == "gemini":
		return Gemini, true
	case IsInterpreter(p.Comm):
		return scriptClient(p.Args)
	}
	return "", false
}

// nodeValueFlags are node options that take the next argument as their
// value when written without "=".
var nodeValueFlags = map[string]bool{
	"-r": true, "--require": true, "--import": true, "--loader": true,
	"--experimental-loader": true, "-C": true, "--conditions": true,
	"--title": true, "--env-file": true, "--input-type": true,
}

// scriptClient names the client whose npm launcher node runs with args
// (args[0] is the interpreter): the first argument that is not an option
// is the script. A node that evaluates code (-e, -p) or has no script is
// nothing.
func scriptClient(args []string) (Client, bool) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--eval" || a == "-p" || a == "--print" || a == "-" || a == "--":
			return "", false
		case nodeValueFlags[a]:
			i++
			continue
		case strings.HasPrefix(a, "-"):
			continue
		}
		return scriptOf(a)
	}
	return "", false
}

// scriptOf names the client a node script path belongs to: the npm bin
// links (gemini, codex), the files they point to (bundle/gemini.js,
// bin/codex.js) or anything inside those packages.
func scriptOf(script string) (Client, bool) {
	switch path.Base(script) {
	case "gemini", "gemini.js":
		return Gemini, true
	case "codex", "codex.js":
		return Codex, true
	}
	switch {
	case strings.Contains(script, "/@google/gemini-cli/"):
		return Gemini, true
	case strings.Contains(script, "/@openai/codex/"):
		return Codex, true
	}
	return "", false
}

// Nearest returns the PID of the first proc in chain (ordered from the
// caller's parent upward) that [Identify] names a client. ok is false when
// there is none, which is a normal outcome, not an error.
func Nearest(chain []Proc) (pid int, ok bool) {
	for _, p := range chain {
		if _, ok := Identify(p); ok {
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

// AgentPID applies [Nearest] to [Chain] of the calling process. ok is false
// when no ancestor is an agent process; err is non-nil only when the walk
// itself failed.
func AgentPID(ctx context.Context) (pid int, ok bool, err error) {
	chain, err := Chain(ctx, os.Getpid())
	if err != nil {
		return 0, false, err
	}
	pid, ok = Nearest(chain)
	return pid, ok, nil
}
