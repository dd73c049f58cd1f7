package boardtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPUTime returns the time all threads of process pid have run on a CPU,
// from Linux's /proc/PID/task/*/schedstat.
func CPUTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("no schedstat for %d: %v", pid, err)
	}
	var sum time.Duration
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			tb.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// ReportLatency sorts lat and reports its p50, p99 and maximum in µs,
// plus the quantiles more (0.95 is "p95-µs").
func ReportLatency(b *testing.B, lat []time.Duration, more ...float64) {
	b.Helper()
	if len(lat) == 0 {
		b.Fatal("no latency samples")
	}
	slices.Sort(lat)
	for _, q := range append([]float64{0.5, 0.99}, more...) {
		b.ReportMetric(float64(Quantile(lat, q).Microseconds()), fmt.Sprintf("p%g-µs", 100*q))
	}
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// Quantile returns the q-quantile (0.5 is the median) of sorted, which
// must not be empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
