//go:build e2e

// Package e2e proves bee inside the real Claude Code CLI (the pinned npm
// release), driven by a scripted fake of the Anthropic Messages API on
// 127.0.0.1: headless `claude -p`, interactive sessions in tmux (with /clear,
// Esc and /exit), the npm package's native binary run directly, and the
// plugin at the repository root. It proves the same of the pinned Codex CLI
// and Gemini CLI, each against a fake of its own model API (ModelAPI).
//
// Run it with `scripts/e2e-setup && go test -tags e2e ./e2e/`. The suite
// fails (it never skips) when the CLI or tmux is missing or the CLI is not
// the pinned version. It builds ./cmd/... from this checkout (once for every
// run that needs them, internal/testbin), copies them into a temporary
// directory and puts that first on PATH.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tractat-us/bee/internal/testbin"
)

// claudeVersion is the Claude Code release the suite is pinned to; keep it in
// step with scripts/e2e-setup.
const claudeVersion = "2.1.328"

var (
	repoRoot  string // the checkout under test
	claudeBin string // the `claude` command (npm's .bin symlink)
	claudeExe string // the npm package's native binary (bin/claude.exe)
	binDir    string // bee-mcp, bee-hook, bee built from this checkout
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		if binDir != "" {
			_ = os.RemoveAll(filepath.Dir(binDir))
		}
		fmt.Fprintf(os.Stderr, "e2e: FAIL: %v\n", err)
		fmt.Println("FAIL")
		os.Exit(1)
	}
	code := m.Run()
	if !keepTemp() {
		_ = os.RemoveAll(filepath.Dir(binDir))
	}
	os.Exit(code)
}

func keepTemp() bool { return os.Getenv("BEE_E2E_KEEP") != "" }

func setup() error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	repoRoot = root

	claudeBin = os.Getenv("BEE_E2E_CLAUDE")
	if claudeBin == "" {
		cache := os.Getenv("BEE_E2E_CACHE")
		if cache == "" {
			cache = filepath.Join(repoRoot, ".e2e")
		}
		claudeBin = filepath.Join(cache, "claude-code-"+claudeVersion, "node_modules", ".bin", "claude")
	}
	if _, err := os.Stat(claudeBin); err != nil {
		return fmt.Errorf("Claude Code CLI not found at %s (run scripts/e2e-setup, or set BEE_E2E_CLAUDE): %v", claudeBin, err)
	}
	out, err := exec.Command(claudeBin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", claudeBin, err, out)
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, claudeVersion+" ") && v != claudeVersion {
		return fmt.Errorf("%s --version says %q; the suite is pinned to %s (run scripts/e2e-setup)", claudeBin, v, claudeVersion)
	}
	if claudeExe, err = filepath.EvalSymlinks(claudeBin); err != nil {
		return err
	}
	if err := setupOtherClients(); err != nil {
		return err
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		return fmt.Errorf("tmux not found on PATH (run scripts/e2e-setup): %v", err)
	}

	tmp, err := os.MkdirTemp("", "bee-e2e-")
	if err != nil {
		return err
	}
	binDir = filepath.Join(tmp, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	if err := buildBee(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: claude %s (%s), native %s, codex %s (%s), gemini %s (%s), bee binaries in %s\n",
		claudeVersion, claudeBin, claudeExe, codexVersion, codexBin, geminiVersion, geminiBin, binDir)
	return nil
}

// buildBee puts bee-mcp, bee-hook and bee, built from the checkout once
// for every test run that needs them (testbin), into binDir as copies.
func buildBee() error {
	built, err := testbin.Make(testbin.Options{Module: repoRoot, Packages: testbin.Commands})
	if err != nil {
		return fmt.Errorf("building the bee commands: %w", err)
	}
	for _, name := range []string{"bee-mcp", "bee-hook", "bee"} {
		src := filepath.Join(built.Dir, name)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("the build did not produce %s: %w", name, err)
		}
		// A copy, not a link: bee-hook --print-config names the bee-mcp
		// beside its own executable, which a symlink would resolve to the
		// shared build cache.
		if err := copyExec(src, filepath.Join(binDir, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyExec copies the executable src to dst.
func copyExec(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
