package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/runfile"
)

// benchSpecEnv carries a benchSpec to the stand-in claude of the benchmark.
const benchSpecEnv = "BEE_TEST_BENCH_SPEC"

// A benchSpec is what the stand-in claude of BenchmarkGuard runs: Rounds
// rounds, each running every hook once, through /bin/sh -c as Claude Code
// runs hooks, in an order that turns by one each round.
type benchSpec struct {
	Rounds int         `json:"rounds"`
	Hooks  []benchHook `json:"hooks"`
}

// A benchHook is one hook command, its stdin, and what its stdout must
// start with ("" for nothing at all).
type benchHook struct {
	Name   string `json:"name"`
	Cmd    string `json:"cmd"`
	Stdin  string `json:"stdin"`
	Stdout string `json:"stdout"`
}

// benchTook is what the stand-in claude of the benchmarks measured of one
// hook: each run's round trip (from just before the shell is started to
// its exit, as Claude Code would see it) and CPU time (user and system, of
// the shell and what it ran), in nanoseconds.
type benchTook struct {
	Wall []int64 `json:"wall"`
	CPU  []int64 `json:"cpu"`
}

// runAsClaudeBench is the stand-in claude of BenchmarkGuard: once a line
// arrives on its stdin (its run file is written by then), it runs the
// spec's hooks and prints, as JSON, a benchTook for each. A hook whose
// exit, stdout or stderr is not as expected ends the run with a message on
// stderr.
func runAsClaudeBench() int {
	var spec benchSpec
	if err := json.Unmarshal([]byte(os.Getenv(benchSpecEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bad spec:", err)
		return 2
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go-ahead:", err)
		return 2
	}
	took := map[string]*benchTook{}
	for _, h := range spec.Hooks {
		took[h.Name] = &benchTook{}
	}
	for round := range spec.Rounds {
		for i := range spec.Hooks {
			h := spec.Hooks[(round+i)%len(spec.Hooks)]
			cmd := exec.Command("/bin/sh", "-c", h.Cmd)
			cmd.Stdin = strings.NewReader(h.Stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			d := time.Since(start)
			switch {
			case err != nil:
				fmt.Fprintf(os.Stderr, "%s: %v: %s\n", h.Name, err, stderr.String())
				return 2
			case stderr.Len() > 0:
				fmt.Fprintf(os.Stderr, "%s: stderr %q\n", h.Name, stderr.String())
				return 2
			case h.Stdout == "" && stdout.Len() > 0, !strings.HasPrefix(stdout.String(), h.Stdout):
				fmt.Fprintf(os.Stderr, "%s: stdout %q, want it to start with %q\n", h.Name, stdout.String(), h.Stdout)
				return 2
			}
			t := took[h.Name]
			t.Wall = append(t.Wall, d.Nanoseconds())
			t.CPU = append(t.CPU, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Nanoseconds())
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(took); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// buildBench builds into dir bee-hook, as go install would, and a Go
// program that does nothing.
func buildBench(b *testing.B, dir string) {
	b.Helper()
	noop := filepath.Join(b.TempDir(), "noop.go")
	if err := os.WriteFile(noop, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		env  string
		args []string
	}{
		{"", []string{"build", "-o", filepath.Join(dir, "bee-hook"), "github.com/tractat-us/bee/cmd/bee-hook"}},
		{"", []string{"build", "-o", filepath.Join(dir, "noop"), noop}},
	} {
		cmd := exec.Command("go", bc.args...)
		if bc.env != "" {
			cmd.Env = append(os.Environ(), bc.env)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s go %s: %v: %s", bc.env, strings.Join(bc.args, " "), err, out)
		}
	}
}

// BenchmarkGuard measures the edit guard's whole round trip, as Claude
// Code sees it: from starting `/bin/sh -c '<bee-hook> --guard'` with a
// Write's input on stdin to its exit, under a stand-in claude whose run
// file names a real control channel (in this process) whose PathChecker
// answers at once. In the same run, round-robin: no-op hooks (`true`, a
// shell builtin; and a Go program that does nothing), bee-hook --version
// (its start-up alone), the guard allowing and denying, and the guard
// through the plugin's launcher (plugin/bee-hook), which finds bee-hook on
// PATH, or, when it is not there, asks go env for GOBIN. For each, the
// round trip's and the CPU time's p50 and p99; bee's share is the guard's
// less the Go no-op's. Each b.N is one round of every hook:
//
//	go test -run '^$' -bench Guard -benchtime 400x ./cmd/bee-hook/
func BenchmarkGuard(b *testing.B) {
	bin := b.TempDir()
	buildBench(b, bin)
	launcher, err := filepath.Abs("../../plugin/bee-hook")
	if err != nil {
		b.Fatal(err)
	}
	e := startBridge(b, clearctl.PathCheckerFunc(holdAuth), 0)

	content := strings.Repeat("// a line of the file the tool writes, as long as most\n", 40) // about 2 KB
	allow := editInput("Write", "/r", "file_path", "/r/docs/guide.md")
	deny := editInput("Edit", "/r", "file_path", "/r/src/auth/login.go")
	allow = strings.Replace(allow, `"content":"x"`, `"content":`+jsonString(content), 1)
	deny = strings.Replace(deny, `"content":"x"`, `"content":`+jsonString(content), 1)
	guard := shellQuote(filepath.Join(bin, "bee-hook")) + " --guard"
	spec := benchSpec{Rounds: b.N, Hooks: []benchHook{
		{Name: "noop-sh", Cmd: "true", Stdin: allow},
		{Name: "noop-go", Cmd: shellQuote(filepath.Join(bin, "noop")), Stdin: allow},
		{Name: "version", Cmd: shellQuote(filepath.Join(bin, "bee-hook")) + " --version >/dev/null", Stdin: allow},
		{Name: "guard-allow", Cmd: guard, Stdin: allow},
		{Name: "guard-deny", Cmd: guard, Stdin: deny, Stdout: `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"bee: src/auth/login.go is reserved by agent:alice#0491068b`},
		{Name: "guard-plugin", Cmd: shellQuote(launcher) + " --guard", Stdin: allow},
		// Claude Code without the Go bin folder on its PATH: the launcher
		// asks go env for GOBIN.
		{Name: "guard-plugin-gobin", Cmd: "PATH=" + shellQuote(goDir(b)+":/usr/bin:/bin") + " GOBIN=" + shellQuote(bin) + " " + shellQuote(launcher) + " --guard", Stdin: allow},
	}}
	took := runBench(b, spec, bin, e)

	for _, h := range spec.Hooks {
		t := took[h.Name]
		b.ReportMetric(quantile(t.Wall, 0.5), h.Name+"-p50-ms")
		b.ReportMetric(quantile(t.Wall, 0.99), h.Name+"-p99-ms")
		b.ReportMetric(quantile(t.CPU, 0.5), h.Name+"-cpu-p50-ms")
		b.ReportMetric(quantile(t.CPU, 0.99), h.Name+"-cpu-p99-ms")
	}
	g, n := took["guard-allow"], took["noop-go"]
	b.ReportMetric(quantile(g.Wall, 0.5)-quantile(n.Wall, 0.5), "bee-share-p50-ms")
	b.ReportMetric(quantile(g.Wall, 0.99)-quantile(n.Wall, 0.99), "bee-share-p99-ms")
	b.ReportMetric(quantile(g.CPU, 0.5)-quantile(n.CPU, 0.5), "bee-share-cpu-p50-ms")
	b.ReportMetric(quantile(g.CPU, 0.99)-quantile(n.CPU, 0.99), "bee-share-cpu-p99-ms")
}

// quantile returns the q quantile of sorted, in milliseconds.
func quantile(sorted []int64, q float64) float64 {
	return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]) / 1e6
}

// BenchmarkGuard_BridgeHangs measures how long the guard holds an edit up
// when the bridge never decides (its PathChecker waits out an hour-long
// bound): the guard gives up at its own bound and allows. Each b.N is one
// hook run:
//
//	go test -run '^$' -bench Guard_BridgeHangs -benchtime 10x ./cmd/bee-hook/
func BenchmarkGuard_BridgeHangs(b *testing.B) {
	bin := b.TempDir()
	buildBench(b, bin)
	e := startBridge(b, clearctl.PathCheckerFunc(func(ctx context.Context, _ clearctl.CheckPathsRequest) (clearctl.CheckPathsAnswer, error) {
		<-ctx.Done()
		return clearctl.CheckPathsAnswer{}, ctx.Err()
	}), time.Hour)
	spec := benchSpec{Rounds: b.N, Hooks: []benchHook{{
		Name:  "guard-hung",
		Cmd:   shellQuote(filepath.Join(bin, "bee-hook")) + " --guard 2>/dev/null",
		Stdin: editInput("Edit", "/r", "file_path", "/r/src/auth/login.go"),
	}}}
	took := runBench(b, spec, bin, e)["guard-hung"].Wall
	b.ReportMetric(quantile(took, 0.5), "p50-ms")
	b.ReportMetric(quantile(took, 1), "max-ms")
}

// runBench runs spec under a stand-in claude whose run file names the
// bridge e, with bin first on PATH, and returns what it measured of each
// hook, sorted.
func runBench(b *testing.B, spec benchSpec, bin string, e runfile.Entry) map[string]*benchTook {
	b.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	claude := filepath.Join(b.TempDir(), "claude")
	if err := os.Symlink(exe, claude); err != nil {
		b.Fatal(err)
	}
	runDir := filepath.Join(b.TempDir(), "run")
	cmd := exec.Command(claude)
	cmd.Env = append(os.Environ(), runAsEnv+"=claude-bench", benchSpecEnv+"="+string(data),
		runfile.EnvDir+"="+runDir, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	goAhead, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if err := runfile.Write(runDir, cmd.Process.Pid, e); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := goAhead.Write([]byte("go\n")); err != nil {
		b.Fatal(err)
	}
	err = cmd.Wait()
	b.StopTimer()
	if err != nil {
		b.Fatalf("stand-in claude: %v: %s", err, stderr.String())
	}
	var took map[string]*benchTook
	if err := json.Unmarshal(stdout.Bytes(), &took); err != nil {
		b.Fatalf("stand-in claude's answer: %v: %s", err, stdout.String())
	}
	for _, t := range took {
		slices.Sort(t.Wall)
		slices.Sort(t.CPU)
	}
	return took
}

// goDir is the folder of the go command.
func goDir(b *testing.B) string {
	p, err := exec.LookPath("go")
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Dir(p)
}

func jsonString(s string) string {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(data)
}
