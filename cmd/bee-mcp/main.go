// Command bee-mcp is bee's bridge: the stdio MCP server that Claude Code
// spawns, one per claude process. It holds the session's identity on the
// action board, serves bounded waits for actions, and serves the loopback
// /retire channel that bee-hook calls on /clear.
//
// stdout carries MCP JSON-RPC only, from the first byte; every log line goes
// to stderr. The bridge ends on stdin closed, SIGINT, SIGTERM or SIGHUP, or
// when its Claude process is gone: it removes its run file, departs from
// the board (its claims go back) and exits 0. Package lifecycle holds all
// of that; this command only reads its flags and environment.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// gcPercent is the bridge's garbage-collection target once it has been
// used, unless $GOGC says otherwise. A bridge idles for hours with well
// under a megabyte live, and a machine runs one per Claude Code session:
// half Go's default keeps about 1.7 MiB less resident per bridge (RssAnon
// 7.7 -> 6.0 MiB after 100 calls) for about 0.03 ms more CPU per tool call
// (a burst of 1000 bee_list_actions calls: 230 -> 270-290 ms).
const gcPercent = 50

func main() {
	// Take the signals before anything else, so that none can kill the
	// bridge before it has cleaned up; run decides what each one means.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// A closed stdout or stderr (claude gone) must fail a write, not kill
	// the bridge halfway through its cleanup.
	signal.Ignore(syscall.SIGPIPE)
	_, gogc := os.LookupEnv("GOGC")
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, sigs, func() { settle(gogc) }))
}

// settle readies a started bridge for its idle hours: it lowers the GC
// target (unless $GOGC set one) after the runtime's next collection, not
// now. A bridge allocates about 1 MiB in all to start, so under Go's
// default target it starts without a single collection; lowering the
// target now would start one at once (the heap is past the lower
// target's first goal), and a collection leaves the runtime's GC
// metadata (mark bits, span sets: about 0.4 MiB) resident in every idle
// bridge, for little garbage freed (BenchmarkExtraSessionPSS measures
// what an idle bridge keeps). Once the bridge is used enough to collect,
// the lower target holds from then on.
func settle(gogcSet bool) {
	if !gogcSet {
		afterNextGC(func() { debug.SetGCPercent(gcPercent) })
	}
}

// gcSentinel is an object nothing refers to, whose cleanup runs after the
// collection that finds it unreachable. It holds a pointer so that the
// runtime never batches it with other objects (tiny allocations).
type gcSentinel struct{ _ *byte }

// afterNextGC runs f once, on the runtime's cleanup goroutine, after the
// next garbage collection.
func afterNextGC(f func()) {
	runtime.AddCleanup(&gcSentinel{}, func(struct{}) { f() }, struct{}{})
}
