// Package guardflow holds the end-to-end tests of reservations at the edit
// and at the commit with real processes and real files: stand-in claude
// processes (the test binary copied under that name) start the real
// bee-mcp on a board file, in git repositories and worktrees, and run the
// real bee-hook through /bin/sh the way Claude Code does; people's
// commits run the real git, bee's pre-commit hook and bee. It also
// measures the edit guard's whole round trip against such a bridge. It
// has no code of its own.
package guardflow
