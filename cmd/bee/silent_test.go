package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions/pgboard"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// bee wait --timeout ends by its timeout whatever the board's server does:
// here it is silent (stopped with SIGSTOP, or cut off: connections open,
// nothing comes back) from the start, or falls silent while bee waits.
// Either way bee says what it can: the server did not answer (exit 1), or
// the timeout passed (exit 124).
func TestWait_TimeoutBoundsASilentServer(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	bee(t, url, "post", "a job nobody ends")

	const timeout = 3 * time.Second
	for _, tc := range []struct {
		name  string
		after time.Duration // how long the proxy speaks before it falls silent
	}{
		{"silent from the start", 0},
		{"silent while waiting", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := pgtest.NewSilentProxy(t, c)
			if tc.after == 0 {
				proxy.Quiet()
			} else {
				time.AfterFunc(tc.after, proxy.Quiet)
			}
			start := time.Now()
			_, errOut, err := run(t, proxy.URL(url), "", "wait", "a-1", "--timeout", timeout.String())
			took := time.Since(start)
			t.Logf("bee wait --timeout %v on a server %s: returned after %v: %v", timeout, tc.name, took.Round(time.Millisecond), err)
			require.Less(t, took, timeout+testtime.Bound(1500*time.Millisecond), "within its timeout")
			require.Error(t, err, "a-1 never ends")
			require.Empty(t, errOut)
			switch exitOf(err) {
			case exitTimeout:
				require.ErrorContains(t, err, "--timeout 3s passed; not ended yet: a-1")
			case exitNo:
				require.ErrorIs(t, err, pgboard.ErrUnreachable)
				require.Regexp(t, "(did not|has not) answer", err.Error())
			default:
				require.Failf(t, "exit code", "exit %d: %v", exitOf(err), err)
			}
		})
	}
}

// bee wait --timeout 0 looks once: on a silent server it ends by
// lookOnceBound (5 s), naming the silent server, not after the 10 s
// connect timeout.
func TestWait_LookOnceBoundsASilentServer(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	bee(t, url, "post", "a job nobody ends")
	proxy := pgtest.NewSilentProxy(t, c)
	proxy.Quiet()
	start := time.Now()
	_, errOut, err := run(t, proxy.URL(url), "", "wait", "a-1", "--timeout", "0")
	took := time.Since(start)
	t.Logf("bee wait --timeout 0 on a silent server: returned after %v: %v", took.Round(time.Millisecond), err)
	require.Less(t, took, lookOnceBound+testtime.Bound(1500*time.Millisecond), "within the look's bound")
	require.Empty(t, errOut)
	require.Equal(t, exitNo, exitOf(err), "%v", err)
	require.ErrorIs(t, err, pgboard.ErrUnreachable)
}
