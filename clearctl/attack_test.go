package clearctl

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/loopback/loopbacktest"
	"github.com/tractat-us/bee/internal/testtime"
)

// underAttackWithin bounds a retire and a waiter's registration while the
// channel is attacked. Unattacked, each takes milliseconds; the hook gives
// a whole /clear 10 s, which is how long the attack of issue 20 made it
// take before it gave up.
const underAttackWithin = 5 * time.Second

// The control channel cannot be starved without the token (issue 20,
// point 4): 16 keep-alive sockets sending a refused request every few
// seconds, or 200 sockets that connect, send nothing and reconnect as soon
// as they are closed, leave /retire and /wait-for-work working within their
// usual time. So do 200 sockets that send their headers a byte at a time.
func TestServer_StarvationAttack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		attack loopbacktest.Attack
	}{
		{"16 refused keep-alive sockets", loopbacktest.Attack{Refused: 16, Every: 2 * time.Second}},
		{"200 reconnecting idle sockets", loopbacktest.Attack{Idle: 200}},
		{"200 sockets sending a byte at a time", loopbacktest.Attack{Slow: 200, Every: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHoldingWaker()
			s := newTestServer(t, &recordingRetirer{}, &Options{Waker: h})
			a := tc.attack
			a.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port()))
			running := a.Start()
			defer func() { t.Logf("attack: %+v", running.Stop()) }()
			// Let the attack take hold: every socket connected at least once.
			require.Eventually(t, func() bool { return running.Connects() >= int64(a.Refused+a.Idle+a.Slow) }, testtime.Bound(10*time.Second), time.Millisecond)
			time.Sleep(200 * time.Millisecond)

			ctx, cancel := context.WithTimeout(t.Context(), testtime.Bound(underAttackWithin))
			defer cancel()
			start := time.Now()
			resp, err := Retire(ctx, s.Port(), testToken, RetireRequest{SessionID: "s-1"})
			require.NoError(t, err, "retire under attack, after %s", time.Since(start))
			require.Equal(t, RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, resp)
			t.Logf("retire under attack: %s", time.Since(start))

			start = time.Now()
			got := make(chan error, 1)
			go func() {
				_, err := WaitForWork(ctx, s.Port(), testToken, WaitRequest{PID: 7, HookEventName: "Stop"})
				got <- err
			}()
			select {
			case req := <-h.arrive:
				require.Equal(t, 7, req.PID)
			case err := <-got:
				t.Fatalf("the waiter ended before it registered, after %s: %v", time.Since(start), err)
			case <-ctx.Done():
				t.Fatalf("the waiter did not register within %s", testtime.Bound(underAttackWithin))
			}
			t.Logf("waiter registered under attack: %s", time.Since(start))
			h.reply <- WaitResponse{Wake: true, Line: "bee: action a-1"}
			require.NoError(t, recv(t, got))
		})
	}
}

// BenchmarkRetire_UnderAttack times one /retire through the real client
// while the channel is attacked as in TestServer_StarvationAttack, each
// retire bounded by the hook's 10 s. It reports the time of a retire
// (ms/retire, failed ones counted at the time they gave up) and the share
// that failed:
//
//	go test -run '^$' -bench Retire_UnderAttack -benchtime 10x ./clearctl/
func BenchmarkRetire_UnderAttack(b *testing.B) {
	for _, bc := range []struct {
		name   string
		attack loopbacktest.Attack
	}{
		{"none", loopbacktest.Attack{}},
		{"refused=16", loopbacktest.Attack{Refused: 16, Every: 8 * time.Second}},
		{"idle=200", loopbacktest.Attack{Idle: 200}},
		{"slow=200", loopbacktest.Attack{Slow: 200, Every: 50 * time.Millisecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newTestServer(b, &recordingRetirer{}, nil)
			a := bc.attack
			a.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port()))
			running := a.Start()
			defer running.Stop()
			for running.Connects() < int64(a.Refused+a.Idle) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			failed := 0
			var total time.Duration
			b.ResetTimer()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				if _, err := Retire(ctx, s.Port(), testToken, RetireRequest{}); err != nil {
					failed++
				}
				total += time.Since(start)
				cancel()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/retire")
			b.ReportMetric(float64(failed)/float64(b.N), "failed/retire")
		})
	}
}
