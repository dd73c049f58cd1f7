// Package clearflow holds the end-to-end tests of bee's /clear path with
// real processes and real files: a stand-in parent whose command name is
// claude (the test binary copied under that name) starts bee-mcp, and later
// runs bee-hook through /bin/sh the way Claude Code does. It has no code of
// its own.
package clearflow
