// Command bee-hook is bee's hook, four hooks in one binary:
//
//   - On /clear (SessionStart, matcher "clear") it tells the session's bridge
//     (bee-mcp) to retire its identity, so the cleared conversation carries
//     on under a fresh one.
//   - With --wait-for-work it is the wake-on-work waiter, an asyncRewake hook
//     on Stop and SessionStart: it long-polls the session's bridge and, when
//     an action arrives for the idle session, prints one line naming it on
//     stderr and exits 2, which makes Claude Code start a turn.
//   - With --guard it is the edit guard, a PreToolUse hook on Claude Code's
//     file tools: it asks the session's bridge whether another live
//     identity has reserved the file and, if so, denies the call with
//     Claude Code's decision JSON on stdout, naming the holder and what to
//     do.
//   - With --pre-commit it is git's pre-commit hook: it refuses (exit 1) a
//     commit that changes a path another live identity holds exclusively.
//
// They find their Claude process by the nearest-claude-ancestor rule, read
// that process's run file and call the bridge's loopback control channel.
// See package hooks for the details.
//
// As a Claude Code hook it never writes stdout (Claude Code would add it to
// the conversation) but for the guard's deny decision, and prints at most
// one line on stderr. It exits 0 whatever happens (bad flags and arguments
// too), except the waiter's wake, the only exit 2, and the pre-commit
// hook's refusal, the only exit 1: a hook must never break the user's
// session, a waiter must never wake it by mistake, and a guard lets the
// work through whenever bee cannot tell. The waiter exits 0 at once outside
// an interactive session (CLAUDE_CODE_SESSION_ATTENDED is not 1) and on
// SIGTERM.
//
// By hand:
//
//	echo '{"source":"clear"}' | bee-hook          # retire this session's bridge
//	bee-hook --list                               # the registered bridges
//	bee-hook --print-config                       # the hook configuration for settings.json
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A closed stderr must not turn "exits 0 always" into death by SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
