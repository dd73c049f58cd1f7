package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tractat-us/bee/internal/testbin"
	"github.com/tractat-us/bee/internal/testtime"
)

// The benchmarks build bee-mcp and a bare go-sdk server (testdata/baresdk)
// without the race detector and measure both in the same run:
//
//	go test -run '^$' -bench . -benchtime 50x ./cmd/bee-mcp/
//
// BenchmarkStartup: exec to the answer of a pipelined initialize +
// notifications/initialized + tools/list. BenchmarkIdleRSS: resident memory
// of bridges idle after 100 tool calls. Every bridge of a target shares
// one board, created before the clock starts, as on a machine where bee
// has run before; each has a run directory of its own.
//
// BEE_BENCH_BASELINE=<a bee-mcp binary> adds that binary as two more
// targets (baseline, baseline-board), measured in the same run, so that a
// change is paired against the build before it:
//
//	go build -o /tmp/bee-mcp-before ./cmd/bee-mcp   # before the change
//	BEE_BENCH_BASELINE=/tmp/bee-mcp-before go test -run '^$' -bench 'Startup|ExtraSessionPSS' -benchtime 20x ./cmd/bee-mcp/

// buildBench returns the binary of pkg built without the race detector,
// once for every benchmark that runs it (testbin).
func buildBench(b *testing.B, pkg string) string {
	b.Helper()
	built, err := testbin.Make(testbin.Options{Packages: []string{pkg}})
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(built.Dir, path.Base(pkg))
}

type benchTarget struct {
	name string
	pkg  string
	// bin, when set, is a built binary run instead of building pkg.
	bin  string
	args []string
	// call is a tools/call for the 100-call memory benchmark.
	call string
}

// benchTargets returns the servers every benchmark measures, side by
// side: bee-mcp without and with its board, the bare go-sdk server, and
// the $BEE_BENCH_BASELINE binary when it is set.
func benchTargets() []benchTarget {
	const mcp = "github.com/tractat-us/bee/cmd/bee-mcp"
	none, board := []string{"--source", "none", "--agent", "bench"}, []string{"--agent", "bench"}
	whoami := `{"name":"bee_whoami"}`
	var ts []benchTarget
	if base := os.Getenv("BEE_BENCH_BASELINE"); base != "" {
		ts = append(ts,
			benchTarget{name: "baseline", bin: base, args: none, call: whoami},
			benchTarget{name: "baseline-board", bin: base, args: board, call: whoami})
	}
	return append(ts,
		benchTarget{name: "bee-mcp", pkg: mcp, args: none, call: whoami},
		benchTarget{name: "bee-mcp-board", pkg: mcp, args: board, call: whoami},
		benchTarget{name: "bare-sdk", pkg: "github.com/tractat-us/bee/cmd/bee-mcp/testdata/baresdk", call: `{"name":"one","arguments":{"n":1}}`})
}

const pipelinedHandshake = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`

type benchProc struct {
	cmd   *exec.Cmd // the stand-in claude
	stdin io.WriteCloser
	out   *bufio.Reader
}

// standInClaude returns a copy of /bin/sh named claude. Every benchmarked
// server runs as its child, so that bee-mcp finds a Claude process and
// opens its control channel and run file, as it does under Claude Code;
// the bare server pays the same shell.
func standInClaude(b *testing.B) string {
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		b.Fatal(err)
	}
	claude := filepath.Join(b.TempDir(), "claude")
	if err := os.WriteFile(claude, sh, 0o755); err != nil {
		b.Fatal(err)
	}
	return claude
}

func startBench(b *testing.B, claude, bin string, args []string, board string) *benchProc {
	// The trailing ":" keeps the shell from exec'ing the server in its
	// place: the server's parent stays claude.
	cmd := exec.Command(claude, append([]string{"-c", `"$0" "$@"; :`, bin}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "BEE_RUN_DIR="+b.TempDir(), "BEE_BOARD="+board, "BEE_LOG_LEVEL=error")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &benchProc{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
}

// readUntilID reads stdout lines until the response with the given id.
func (p *benchProc) readUntilID(b *testing.B, id int) {
	want := fmt.Sprintf(`"id":%d,`, id)
	for {
		line, err := p.out.ReadString('\n')
		if err != nil {
			b.Fatalf("read: %v", err)
		}
		if strings.Contains(line, want) && !strings.Contains(line, `"method"`) {
			return
		}
	}
}

// serverPID returns the pid of the server, the stand-in claude's child.
func (p *benchProc) serverPID(b *testing.B) int {
	pid := p.cmd.Process.Pid
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		b.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		b.Fatalf("children of the stand-in claude: %q", data)
	}
	return child
}

func (p *benchProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testtime.Bound(2 * time.Second)):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// benchBoard returns the path of a board that one run of bin has created.
func benchBoard(b *testing.B, claude, bin string, args []string) string {
	board := filepath.Join(b.TempDir(), "board.db")
	p := startBench(b, claude, bin, args, board)
	io.WriteString(p.stdin, pipelinedHandshake)
	p.readUntilID(b, 2)
	p.stop()
	return board
}

// A benchRun is one target's sub-benchmark: its binary, run as the child
// of a stand-in claude, on a board one run of it has created.
type benchRun struct {
	tgt                benchTarget
	bin, claude, board string
}

// start starts one server of the run.
func (r benchRun) start(b *testing.B) *benchProc {
	return startBench(b, r.claude, r.bin, r.tgt.args, r.board)
}

// forEachTarget runs f as a sub-benchmark of each target, all in one run
// so that bee-mcp and the bare server meet the same machine.
func forEachTarget(b *testing.B, f func(b *testing.B, r benchRun)) {
	for _, tgt := range benchTargets() {
		bin := tgt.bin
		if bin == "" {
			bin = buildBench(b, tgt.pkg)
		}
		b.Run(tgt.name, func(b *testing.B) {
			claude := standInClaude(b)
			f(b, benchRun{tgt: tgt, bin: bin, claude: claude, board: benchBoard(b, claude, bin, tgt.args)})
		})
	}
}

func BenchmarkStartup(b *testing.B) {
	forEachTarget(b, func(b *testing.B, r benchRun) {
		var times, cpu []time.Duration
		for b.Loop() {
			start := time.Now()
			p := r.start(b)
			io.WriteString(p.stdin, pipelinedHandshake)
			p.readUntilID(b, 2)
			times = append(times, time.Since(start))
			b.StopTimer()
			cpu = append(cpu, cpuTime(b, p.serverPID(b)))
			p.stop()
			b.StartTimer()
		}
		b.ReportMetric(median(times), "median-ms")
		b.ReportMetric(median(cpu), "median-cpu-ms")
	})
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}

// cpuTime returns the CPU time process pid has used so far, all its
// threads together (the first field of each thread's schedstat: time on a
// CPU, in ns).
func cpuTime(b *testing.B, pid int) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("threads of %d: %v", pid, err)
	}
	var sum time.Duration
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has ended
		}
		ns, err := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", f, data)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// procKiB reads one "<field>: N kB" line of /proc/<pid>/<file>.
func procKiB(b *testing.B, pid int, file, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/%s", field, pid, file)
	return 0
}

// idleSiblings is how many bridges BenchmarkIdleRSS runs side by side, as
// on a machine with several Claude Code sessions open.
const idleSiblings = 8

// BenchmarkIdleRSS runs idleSiblings bridges at once, each idle after 100
// tool calls, and reports the medians over bridges of:
//   - idle-rss-MiB: VmRSS, which counts in full the pages of the binary
//     that every bridge shares from the page cache;
//   - idle-anon-MiB: RssAnon, the memory that is one bridge's alone;
//   - idle-pss-MiB: Pss, RssAnon plus its share of the shared pages: what
//     one more bridge costs the machine.
func BenchmarkIdleRSS(b *testing.B) {
	forEachTarget(b, func(b *testing.B, r benchRun) {
		var rss, anon, pss []int
		for b.Loop() {
			procs := make([]*benchProc, idleSiblings)
			for i := range procs {
				procs[i] = r.start(b)
			}
			for _, p := range procs {
				io.WriteString(p.stdin, pipelinedHandshake)
				p.readUntilID(b, 2)
				for i := range 100 {
					fmt.Fprintf(p.stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`+"\n", 100+i, r.tgt.call)
					p.readUntilID(b, 100+i)
				}
			}
			time.Sleep(500 * time.Millisecond) // idle
			for _, p := range procs {
				pid := p.serverPID(b)
				rss = append(rss, procKiB(b, pid, "status", "VmRSS"))
				anon = append(anon, procKiB(b, pid, "status", "RssAnon"))
				pss = append(pss, procKiB(b, pid, "smaps_rollup", "Pss"))
			}
			for _, p := range procs {
				p.stop()
			}
		}
		for _, m := range []struct {
			kib  []int
			unit string
		}{{rss, "idle-rss-MiB"}, {anon, "idle-anon-MiB"}, {pss, "idle-pss-MiB"}} {
			sort.Ints(m.kib)
			b.ReportMetric(float64(m.kib[len(m.kib)/2])/1024, m.unit)
		}
	})
}

// extraSessions is how many servers BenchmarkExtraSessionPSS starts beside
// the first.
const extraSessions = 9

// BenchmarkExtraSessionPSS reports what one more session costs the
// machine: the Pss of 1+extraSessions servers side by side minus that of
// one alone, per extra server (pss-per-extra-MiB). Pss splits each shared
// page among the processes mapping it, so the binary's code counts once
// and what remains is each process's own memory. The servers are idle
// 1.5 s after start, with no handshake: what every open session costs
// before it is used.
func BenchmarkExtraSessionPSS(b *testing.B) {
	forEachTarget(b, func(b *testing.B, r benchRun) {
		totalPss := func(n int) int {
			procs := make([]*benchProc, n)
			for i := range procs {
				procs[i] = r.start(b)
			}
			time.Sleep(1500 * time.Millisecond) // started and idle
			sum := 0
			for _, p := range procs {
				sum += procKiB(b, p.serverPID(b), "smaps_rollup", "Pss")
			}
			for _, p := range procs {
				p.stop()
			}
			return sum
		}
		var per []int
		for b.Loop() {
			one := totalPss(1)
			many := totalPss(1 + extraSessions)
			per = append(per, (many-one)/extraSessions)
		}
		slices.Sort(per)
		b.ReportMetric(float64(per[len(per)/2])/1024, "pss-per-extra-MiB")
	})
}
