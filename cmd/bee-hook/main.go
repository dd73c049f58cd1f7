// Command bee-hook is bee's Claude Code SessionStart hook. On /clear it
// tells the session's bridge (bee-mcp) to retire its identity, so the
// cleared conversation carries on under a fresh one.
//
// Installed by the bee plugin's hooks/hooks.json (matcher "clear"), it reads
// Claude Code's SessionStart input on stdin, finds its Claude process by the
// nearest-claude-ancestor rule, reads that process's run file and calls the
// bridge's loopback /retire channel. See package hooks for the details.
//
// As a hook it never writes stdout (Claude Code would add it to the
// conversation), prints at most one line on stderr, is bounded by --timeout,
// and always exits 0, whatever happens: a hook must never break the user's
// session. Bad flags and arguments exit 0 too.
//
// By hand:
//
//	echo '{"source":"clear"}' | bee-hook          # retire this session's bridge
//	bee-hook --list                               # the registered bridges
//	bee-hook --print-config > hooks/hooks.json    # the hook configuration
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
