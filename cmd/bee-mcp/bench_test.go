package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks build bee-mcp and a bare go-sdk server (testdata/baresdk)
// without the race detector and measure both in the same run:
//
//	go test -run '^$' -bench . -benchtime 50x ./cmd/bee-mcp/
//
// BenchmarkStartup: exec to the answer of a pipelined initialize +
// notifications/initialized + tools/list. BenchmarkIdleRSS: resident memory
// of a bridge idle after 100 tool calls.

func buildBench(b *testing.B, name, pkg string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("build %s: %v", pkg, err)
	}
	return out
}

type benchTarget struct {
	name string
	pkg  string
	args []string
	// call is a tools/call for the 100-call memory benchmark.
	call string
}

var benchTargets = []benchTarget{
	{"bee-mcp", ".", []string{"--source", "none", "--agent", "bench"}, `{"name":"bee_whoami"}`},
	{"bee-mcp-board", ".", []string{"--agent", "bench"}, `{"name":"bee_whoami"}`},
	{"bare-sdk", "./testdata/baresdk", nil, `{"name":"one","arguments":{"n":1}}`},
}

const pipelinedHandshake = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`

type benchProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startBench(b *testing.B, bin string, args []string) *benchProc {
	cmd := exec.Command(bin, args...)
	dir := b.TempDir()
	cmd.Env = append(os.Environ(), "BEE_RUN_DIR="+dir, "BEE_BOARD="+dir+"/board.db", "BEE_LOG_LEVEL=error")
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

func (p *benchProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func BenchmarkStartup(b *testing.B) {
	for _, tgt := range benchTargets {
		bin := buildBench(b, tgt.name, tgt.pkg)
		b.Run(tgt.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				p := startBench(b, bin, tgt.args)
				io.WriteString(p.stdin, pipelinedHandshake)
				p.readUntilID(b, 2)
				times = append(times, time.Since(start))
				b.StopTimer()
				p.stop()
				b.StartTimer()
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
		})
	}
}

// statusKiB reads one "<field>: N kB" line of /proc/<pid>/status.
func statusKiB(b *testing.B, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func BenchmarkIdleRSS(b *testing.B) {
	for _, tgt := range benchTargets {
		bin := buildBench(b, tgt.name, tgt.pkg)
		b.Run(tgt.name, func(b *testing.B) {
			// VmRSS counts the binary's code pages, which every bridge
			// shares from the page cache; RssAnon is what one bridge costs
			// on its own.
			var rss, anon []int
			for b.Loop() {
				p := startBench(b, bin, tgt.args)
				io.WriteString(p.stdin, pipelinedHandshake)
				p.readUntilID(b, 2)
				for i := range 100 {
					fmt.Fprintf(p.stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`+"\n", 100+i, tgt.call)
					p.readUntilID(b, 100+i)
				}
				time.Sleep(500 * time.Millisecond) // idle
				rss = append(rss, statusKiB(b, p.cmd.Process.Pid, "VmRSS"))
				anon = append(anon, statusKiB(b, p.cmd.Process.Pid, "RssAnon"))
				p.stop()
			}
			sort.Ints(rss)
			sort.Ints(anon)
			b.ReportMetric(float64(rss[len(rss)/2])/1024, "idle-rss-MiB")
			b.ReportMetric(float64(anon[len(anon)/2])/1024, "idle-anon-MiB")
		})
	}
}
