package boardtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/race"
)

func init() {
	cases = append(cases, testCase{"KilledMidEnd", testKilledMidEnd})
}

// EnvKillTrials sets how many trials KilledMidEnd runs (default 8, and 4
// under -race or -short).
const EnvKillTrials = "BEE_BOARDTEST_KILLS"

// killShape is how many killed trials KilledMidEnd runs by default, and
// how large a plan each ends. The race detector slows a trial (a plan
// posted, ended and called off) about twentyfold, and what a trial runs is
// what the other contract cases run under it too: under -race four kills,
// two finishes and two fails, of a plan of 250 still fall at random
// moments of an end that touches hundreds of rows (a quarter of a second
// and more); the full eight of 1,000 (actions.MaxPlan) run without -race
// (go test ./actions/board/). The inner loop (-short) runs the small shape
// too.
func killShape() (trials, size int) {
	if race.Enabled || testing.Short() {
		return 4, 250
	}
	return 8, actions.MaxPlan
}

// A process SIGKILLed while it ends an action that 999 others wait for
// (a plan of 1,000; 250 under -race or -short, see killShape) leaves the board as if the end and all its effects
// happened, or none did: the action done and every waiter open, or failed
// and every waiter cancelled; or the action not ended and every waiter
// still blocked. The kill falls at a random moment of the end, measured
// by a first finish and fail that are not killed; trials alternate
// finish and fail.
func testKilledMidEnd(t *testing.T, open Opener) {
	b := open(t, "", Options{})
	ctx := t.Context()
	trials, size := killShape()
	if n := EnvMillis(EnvKillTrials); n > 0 {
		trials = int(n / time.Millisecond)
	}
	var took [2]time.Duration // how long a finish and a fail take, seen from here
	outcomes := map[string]int{}
	for trial := 0; trial < trials+2; trial++ {
		fail := trial%2 == 1
		w := StartProc(t, "worker", b.Location())
		who := strings.TrimPrefix(w.Expect("ready ", 30*time.Second), "ready ")
		plan := make([]actions.PlanEntry, size)
		plan[0] = actions.PlanEntry{Key: "root", To: who, Title: fmt.Sprintf("trial %d root", trial)}
		for i := 1; i < len(plan); i++ {
			plan[i] = actions.PlanEntry{Key: fmt.Sprintf("w%d", i), To: "nobody", Title: fmt.Sprintf("trial %d waiter %d", trial, i),
				After: []string{"root"}}
		}
		posted, err := b.PostPlan(ctx, "user:chaos", plan)
		require.NoError(t, err)
		root := posted.Records[0]
		w.Send("claim")
		require.Equal(t, "claimed "+root.ID, w.Expect("claimed ", 10*time.Second))

		cmd := "finish " + root.ID + " ok"
		if fail {
			cmd = "fail " + root.ID + " chaos"
		}
		kind := trial % 2
		start := time.Now()
		w.Send(cmd)
		if trial < 2 { // the measures: not killed
			w.Expect("ended ", 60*time.Second)
			took[kind] = time.Since(start)
		} else {
			time.Sleep(time.Duration(rand.Int64N(int64(took[kind])*3/2 + 1)))
		}
		w.Kill()
		outcomes[judgeKilledEnd(t, b, root.ID, len(plan))]++
		// Clear the board for the next trial: whatever is left is called
		// off. A commit the killed process sent may land only now (on a
		// server); then the plan must be whole again.
		if r := get(t, b, root.ID); !r.State.Ended() {
			_, err := b.Cancel(ctx, "user:chaos", root.ID, "next trial")
			if errors.Is(err, actions.ErrEnded) {
				outcomes["late "+judgeKilledEnd(t, b, root.ID, len(plan))]++
				continue
			}
			require.NoError(t, err)
		}
	}
	t.Logf("a finish took %v, a fail %v; after %d kills and 2 measures: %v", took[0], took[1], trials, outcomes)
}

// judgeKilledEnd requires that the plan of root (n actions) is whole: its
// end and all its effects, or none. It says which.
func judgeKilledEnd(t *testing.T, b actions.Board, rootID string, n int) string {
	t.Helper()
	g, err := b.Plan(t.Context(), rootID)
	require.NoError(t, err)
	require.Len(t, g.Records, n)
	root := g.Records[0]
	require.Equal(t, rootID, root.ID)
	want := actions.Blocked
	switch root.State {
	case actions.Done:
		want = actions.Open
	case actions.Failed:
		want = actions.Cancelled
	case actions.Open, actions.Claimed: // not ended; its holder's death gives it back
	default:
		t.Fatalf("root %s is %s", root.ID, root.State)
	}
	counts := map[actions.State]int{}
	for _, r := range g.Records[1:] {
		counts[r.State]++
		if want == actions.Cancelled {
			require.Equal(t, "prerequisite "+root.ID+" failed: chaos", r.Reason)
		}
	}
	require.Equal(t, map[actions.State]int{want: n - 1}, counts, "root %s is %s", root.ID, root.State)
	return string(root.State)
}
