package testtime

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestFromMachine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		race  bool
		procs int
		load  float64
		want  float64
	}{
		{"idle, many CPUs", false, 8, 0.5, 1},
		{"race", true, 8, 0, 2},
		{"two CPUs", false, 2, 1, 2},
		{"race on two CPUs", true, 2, 2, 4},
		{"busy: load 8 on 2 CPUs", false, 2, 8, 8},
		{"race, load 16 on 2 CPUs", true, 2, 16, 32},
		{"load unknown", false, 4, 0, 1},
		{"load just at one per CPU", false, 4, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, FromMachine(tc.race, tc.procs, tc.load), 1e-9)
		})
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"1": 1, " 4 ": 4, "2.5": 2.5, "0.5": 0.5} {
		got, err := Parse(in)
		require.NoError(t, err, "%q", in)
		require.InDelta(t, want, got, 1e-9, "%q", in)
	}
	for _, in := range []string{"", "0", "-1", "fast", "NaN", "Inf", "1e9"} {
		_, err := Parse(in)
		require.ErrorContains(t, err, FactorEnv, "%q", in)
	}
}

func TestBound(t *testing.T) {
	t.Parallel()
	f := Factor()
	require.Greater(t, f, 0.0)
	name, value, _ := strings.Cut(Env(), "=")
	require.Equal(t, FactorEnv, name)
	passed, err := Parse(value)
	require.NoError(t, err)
	require.Equal(t, f, passed, "a child given Env has the same factor")
	require.Equal(t, time.Duration(float64(100*time.Millisecond)*f), Bound(100*time.Millisecond))
}

// A goroutine that ends within the bound is no leak, even when goleak by
// itself would have given up on it; one that outlives the bound is.
func TestFindLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	done := make(chan struct{})
	go func() {
		time.Sleep(time.Second) // longer than goleak's own wait of about 0.4 s
		close(done)
	}()
	require.NoError(t, findLeaks(time.Minute, before))
	select {
	case <-done:
	default:
		t.Fatal("FindLeaks returned before the goroutine ended")
	}

	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	require.Error(t, findLeaks(100*time.Millisecond, before), "a goroutine that outlives the bound is a leak")
}
