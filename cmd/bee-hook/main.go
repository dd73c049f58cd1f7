// Command bee-hook is bee's Claude Code hook, two hooks in one binary:
//
//   - On /clear (SessionStart, matcher "clear") it tells the session's bridge
//     (bee-mcp) to retire its identity, so the cleared conversation carries
//     on under a fresh one.
//   - With --wait-for-work it is the wake-on-work waiter, an asyncRewake hook
//     on Stop and SessionStart: it long-polls the session's bridge and, when
//     an action arrives for the idle session, prints one line naming it on
//     stderr and exits 2, which makes Claude Code start a turn.
//
// Both find their Claude process by the nearest-claude-ancestor rule, read
// that process's run file and call the bridge's loopback control channel.
// See package hooks for the details.
//
// As a hook it never writes stdout (Claude Code would add it to the
// conversation) and prints at most one line on stderr. It exits 0 whatever
// happens (bad flags and arguments too), except the waiter's wake, the only
// exit 2: a hook must never break the user's session, and a waiter must
// never wake it by mistake. The waiter exits 0 at once outside an
// interactive session (CLAUDE_CODE_SESSION_ATTENDED is not 1) and on
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
