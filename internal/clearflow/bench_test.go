package clearflow

import (
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkHook times a /clear retire from the hook's start to its exit,
// run by the stand-in claude through /bin/sh -c as Claude Code runs it:
// bee-hook beside the spike's shell hook (ps, jq, curl), paired in one run
// against the same bridge.
//
//	go test -run '^$' -bench Hook -benchtime 200x ./internal/clearflow/
func BenchmarkHook(b *testing.B) {
	for _, tool := range []string{"jq", "curl", "ps"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("the shell yardstick needs %s (apt-get install jq curl procps)", tool)
		}
	}
	shell, err := filepath.Abs("testdata/shell-hook.sh")
	if err != nil {
		b.Fatal(err)
	}
	s := start(b, "none")
	input := `{"session_id":"bench","transcript_path":"/tmp/bench.jsonl","source":"clear"}`
	hooks := []struct{ name, cmd string }{
		{"bee-hook", filepath.Join(bin, "bee-hook")},
		{"shell", shell},
	}
	took := map[string][]time.Duration{}
	for b.Loop() {
		for _, h := range hooks {
			r := s.runHook(h.cmd, input)
			if r.Exit != 0 || !strings.Contains(r.Stderr, "retired") {
				b.Fatalf("%s: exit %d, stderr %q, err %s", h.name, r.Exit, r.Stderr, r.Err)
			}
			took[h.name] = append(took[h.name], r.Took)
		}
	}
	for _, h := range hooks {
		d := took[h.name]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, h.name+"-median-ms")
		b.ReportMetric(float64(d[len(d)*9/10].Microseconds())/1000, h.name+"-p90-ms")
	}
}
