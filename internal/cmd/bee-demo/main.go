// Command bee-demo plays the agent's part in bee's quick-start demo; run
// it through scripts/demo, which builds bee and prepares the board. See
// package demo.
//
//	bee-demo --bin DIR --board PATH --run-dir DIR [--shared]
//
// It exits 0 when the demo ran through, 1 when it failed (it says why on
// stderr) and 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tractat-us/bee/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bee-demo", flag.ContinueOnError)
	var cfg demo.Config
	fs.StringVar(&cfg.Bin, "bin", "", "the directory holding bee and bee-mcp")
	fs.StringVar(&cfg.Board, "board", "", "the board file")
	fs.StringVar(&cfg.RunDir, "run-dir", "", "the bridge's run directory")
	fs.BoolVar(&cfg.Shared, "shared", false, "the board may hold other work")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Bin == "" || cfg.Board == "" || cfg.RunDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bee-demo: --bin, --board and --run-dir are required; run scripts/demo instead")
		return 2
	}
	cfg.Out = os.Stdout
	if err := demo.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		return 1
	}
	return 0
}
