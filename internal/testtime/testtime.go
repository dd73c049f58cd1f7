// Package testtime scales the wall-clock bounds of bee's tests to the
// machine they run on, so that a busy machine slows the tests down instead
// of failing them.
//
// A bound is how long a test waits for something before it fails: "the
// claim is offered again within 3 s", "Depart takes less than 100 ms". On
// a loaded machine, or under the race detector, the same work takes longer
// and a bound chosen on an idle machine fails for no fault of the code.
// Every such bound is written Bound(nominal), nominal being what the work
// needs on an idle machine with slack, and is stretched by Factor.
//
// Factor is $BEE_TEST_TIME_FACTOR when that is set (a positive number; 1
// gives the nominal bounds, 10 bounds ten times as long). Otherwise it
// comes from the machine, once, when the test binary starts: 1, doubled
// under -race, doubled when GOMAXPROCS is below 4, and multiplied by the
// load average per CPU when that is above 1 (Linux; read from
// /proc/loadavg). A test that re-runs its binary as a worker whose waits
// must keep step with the test's bounds passes it on with Env.
//
// Durations that are themselves under test (a lease, a poll interval, a
// wait that must time out, a sleep that lets something happen) are not
// bounds: tests keep them as they are.
package testtime

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tractat-us/bee/internal/race"
)

// FactorEnv is the variable that sets Factor, overriding the machine's.
const FactorEnv = "BEE_TEST_TIME_FACTOR"

// Factor returns how many times longer than nominal every bound is on this
// run. It is at least 1 unless $BEE_TEST_TIME_FACTOR says less, and it
// panics, naming the variable, when that is not a positive number.
func Factor() float64 { return factor }

var factor = func() float64 {
	if v, ok := os.LookupEnv(FactorEnv); ok {
		f, err := Parse(v)
		if err != nil {
			panic(err)
		}
		return f
	}
	return FromMachine(race.Enabled, runtime.GOMAXPROCS(0), loadAverage())
}()

// Env returns the FactorEnv=... entry that gives a child process this
// binary's Factor. (The test binary does not set it in its own
// environment: tests compare their environment with their children's.)
func Env() string {
	return FactorEnv + "=" + strconv.FormatFloat(Factor(), 'g', -1, 64)
}

// Bound returns the bound nominal stretched by Factor.
func Bound(nominal time.Duration) time.Duration {
	return time.Duration(float64(nominal) * Factor())
}

// Parse reads a $BEE_TEST_TIME_FACTOR value.
func Parse(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) || f > 1e6 {
		return 0, fmt.Errorf("%s=%q: want a positive number, such as 1 or 4", FactorEnv, v)
	}
	return f, nil
}

// FromMachine is the factor of a machine where the race detector is on or
// not, with procs for GOMAXPROCS and load for the one-minute load average
// (0 where unknown).
func FromMachine(raceOn bool, procs int, load float64) float64 {
	f := 1.0
	if raceOn {
		f *= 2
	}
	if procs < 4 {
		f *= 2
	}
	if perCPU := load / float64(max(procs, 1)); perCPU > 1 {
		f *= perCPU
	}
	return f
}

// loadAverage returns the one-minute load average, or 0 where the machine
// does not say (outside Linux).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0
	}
	return load
}
