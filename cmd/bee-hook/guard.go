package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/tractat-us/bee/hooks"
)

// hookConfig is what the flags say to the edit guard and the pre-commit
// hook.
type hookConfig struct {
	bridge  hooks.Bridge
	timeout time.Duration // 0: the hook's own default
}

// runGuard is bee-hook --guard: it prints Claude Code's deny decision on
// stdout when the bridge refuses the edit, nothing otherwise, and at most
// one line on stderr. It always returns 0: a PreToolUse hook denies with
// its JSON, and any other status would be an error Claude Code shows.
func runGuard(ctx context.Context, hc hookConfig, stdin io.Reader, stdout, stderr io.Writer) int {
	if f, ok := stdin.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		fmt.Fprintln(stderr, `bee-hook: stdin is a terminal, not a PreToolUse input; try: echo '{"tool_name":"Write","tool_input":{"file_path":"/abs/file"}}' | bee-hook --guard`)
		return 0
	}
	res := hooks.Guard(ctx, hooks.GuardConfig{Bridge: hc.bridge, Timeout: hc.timeout}, stdin)
	if res.Deny != "" {
		_, _ = stdout.Write(hooks.DenyOutput(res.Deny))
	}
	if res.Line != "" {
		fmt.Fprintln(stderr, res.Line)
	}
	return 0
}

// runPreCommit is bee-hook --pre-commit: it returns hooks.ExitRefuse when
// the commit must not go ahead, 0 otherwise, and prints what it has to say
// on stderr.
func runPreCommit(ctx context.Context, hc hookConfig, stderr io.Writer) int {
	res := hooks.PreCommit(ctx, hooks.PreCommitConfig{Bridge: hc.bridge, Timeout: hc.timeout})
	if res.Text != "" {
		fmt.Fprintln(stderr, trimNewline(res.Text))
	}
	if res.Refuse {
		return hooks.ExitRefuse
	}
	return 0
}

func trimNewline(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}

// countTrue counts the true values among bs.
func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// flagged returns d when the flag name was given, else 0.
func flagged(fs *flag.FlagSet, name string, d time.Duration) time.Duration {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return d
	}
	return 0
}
