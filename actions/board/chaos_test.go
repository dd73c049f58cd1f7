package board

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/internal/testtime"
)

// envChaos, set to a number of actions, runs the chaos test at that size
// with more processes, for a manual run:
//
//	BEE_BOARD_CHAOS=20000 go test -run Chaos -v -timeout 30m ./actions/board/
const envChaos = "BEE_BOARD_CHAOS"

// Claimant processes are killed (SIGKILL) and stopped (SIGSTOP, then
// SIGCONT a while later, sometimes longer than a lease) at random while
// they claim and finish actions posted meanwhile: a blow every 150 ms, for
// as long as the posting lasts and at least as many as fall in twice its
// nominal time, then the survivors finish the rest (on a loaded machine,
// where a new claimant takes seconds to start, blows without end would
// leave the work to the few that got going; and a large run on a loaded
// machine posts far slower than its nominal rate, so its blows go on
// until the last post). Exactly once holds: every action ends done, finished by exactly
// one identity, the last one that claimed it. A claimant stopped past its lease finds its claim gone to
// another (its finish is refused) and its identity departed (it carries on
// under a new one); a killed claimant's claims go to others at the next
// look.
func TestBoard_Chaos(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak test of killed and stopped processes: skipped under -short")
	}
	t.Parallel()
	// Posts are paced, so that the blows fall while there is work.
	total, procs, per, rate := 600, 4, 2, 200.0
	if raceEnabled {
		total, rate = 150, 50
	}
	if n, _ := strconv.Atoi(os.Getenv(envChaos)); n > 0 {
		total, procs, rate = n, 8, 500
	}
	const (
		lease   = time.Second
		every   = 150 * time.Millisecond // between two blows
		maxStop = 2 * lease
		work    = 40 * time.Millisecond // at most, per claim
	)
	path := filepath.Join(t.TempDir(), "board.db")
	b := openTest(t, path, &Options{Lease: lease})
	env := []string{fmt.Sprintf("%s=%d", boardtest.EnvLease, lease.Milliseconds()), fmt.Sprintf("%s=%d", boardtest.EnvWaiters, per),
		fmt.Sprintf("%s=%d", boardtest.EnvMS, work.Milliseconds())}
	start := time.Now()

	var (
		all     []*boardtest.Proc                // every claimant ever started, for their reports
		live    []*boardtest.Proc                // not killed
		killed  = map[*boardtest.Proc][]string{} // what each said before it died
		stopped = map[*boardtest.Proc]time.Time{}
		kills   int
		stops   int
		long    int // stops longer than a lease
	)
	spawn := func() {
		p := boardtest.StartProc(t, "chaos", path, env...)
		all = append(all, p)
		live = append(live, p)
	}
	for range procs {
		spawn()
	}
	for _, p := range live {
		p.Expect("ready", 60*time.Second)
	}

	// Post while the blows fall.
	posted := make(chan string, total)
	var lockedPosts atomic.Int64 // posts refused with ErrLocked, then tried again
	var postedN atomic.Int64     // posts made, for the progress lines
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(posted)
		pace := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer pace.Stop()
		for i := range total {
			<-pace.C
			// A claimant stopped while it holds the board's lock keeps a
			// post out for as long as it is stopped, and longer on a
			// loaded machine: a post refused with ErrLocked wrote
			// nothing, and is tried again, as a script would.
			r, err := b.Post(t.Context(), "user:chaos", actions.Draft{Title: fmt.Sprintf("job %d", i)})
			for tries := 1; errors.Is(err, ErrLocked) && tries < 20; tries++ {
				lockedPosts.Add(1)
				r, err = b.Post(t.Context(), "user:chaos", actions.Draft{Title: fmt.Sprintf("job %d", i)})
			}
			if err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
			posted <- r.ID
			postedN.Add(1)
		}
	})

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("%d actions posted at %.0f/s, %d claimant processes of %d identities, lease %v, seed %d", total, rate, procs, per, lease, seed)
	// At least 3 minutes, and 20 ms an action for a large run.
	allowed := testtime.Bound(max(3*time.Minute, time.Duration(total)*20*time.Millisecond))
	deadline := time.Now().Add(allowed)
	blows := max(10, int(2*float64(total)/rate*float64(time.Second)/float64(every)))
	tick := time.NewTicker(every)
	defer tick.Stop()
	progress := time.Now()
	for {
		var done int
		err := b.db.QueryRow(`SELECT count(*) FROM every_action WHERE state = 'done'`).Scan(&done)
		if isLockContention(err) {
			// A claimant stopped while it holds one of SQLite's WAL locks
			// can make this read, which goes around the board, give up
			// (SQLITE_PROTOCOL); look again at the next tick. The stopped
			// claimants are still let go below: skipping that would leave
			// the one holding the lock stopped for good.
			t.Logf("count of done actions: %v; looking again", err)
			done, err = -1, nil
		}
		require.NoError(t, err)
		if done == total {
			break
		}
		if time.Since(progress) >= 10*time.Second {
			// How a long run goes: the post rate is what a loaded machine
			// slows first.
			progress = time.Now()
			el := time.Since(start)
			t.Logf("progress %v: posted %d (%.1f/s), done %d, posts refused as locked %d, kills %d, stops %d",
				el.Round(time.Second), postedN.Load(), float64(postedN.Load())/el.Seconds(), done, lockedPosts.Load(), kills, stops)
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d actions done after %v", done, total, allowed)
		<-tick.C
		now := time.Now()
		for p, until := range stopped {
			if now.After(until) {
				require.NoError(t, contProc(p.Pid()))
				delete(stopped, p)
			}
		}
		// Keep at least one claimant running; once every action is posted,
		// strike no more than blows.
		if len(stopped) >= len(live)-1 || (kills+stops >= blows && postedN.Load() >= int64(total)) {
			continue
		}
		i := rng.IntN(len(live))
		p := live[i]
		if _, ok := stopped[p]; ok {
			continue
		}
		if rng.IntN(2) == 0 {
			killed[p] = p.Kill()
			kills++
			live = slices.Delete(live, i, i+1)
			spawn()
		} else {
			d := time.Duration(rng.Int64N(int64(maxStop)))
			require.NoError(t, stopProc(p.Pid()))
			stopped[p] = now.Add(d)
			stops++
			if d > lease {
				long++
			}
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	require.False(t, t.Failed())
	for p := range stopped {
		require.NoError(t, contProc(p.Pid()))
	}

	// Every report of every claimant, the killed ones' up to their death.
	type claim struct {
		who string
		at  int64 // claimed_at, unix ms
	}
	claims := map[string][]claim{}
	finished := map[string][]string{}
	refused, departed := 0, 0
	for _, p := range all {
		var lines []string
		if slices.Contains(live, p) {
			lines = p.Finish(60 * time.Second)
		} else {
			lines = killed[p]
		}
		for _, line := range lines {
			f := strings.Fields(line)
			switch {
			case len(f) == 4 && f[0] == "got":
				at, err := strconv.ParseInt(f[3], 10, 64)
				require.NoError(t, err, line)
				claims[f[1]] = append(claims[f[1]], claim{f[2], at})
			case len(f) == 3 && f[0] == "done":
				finished[f[1]] = append(finished[f[1]], f[2])
			case len(f) == 3 && f[0] == "lost":
				refused++
			case len(f) == 2 && f[0] == "departed":
				departed++
			}
		}
	}

	ids := map[string]bool{}
	for id := range posted {
		ids[id] = true
	}
	require.Len(t, ids, total)
	var lost, doubles, reclaimed int
	rows, err := b.db.Query(`SELECT seq, state, holder, result FROM every_action`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var state, holder, result string
		require.NoError(t, rows.Scan(&seq, &state, &holder, &result))
		id := position.ActionID(seq)
		require.True(t, ids[id], id)
		if state != "done" {
			lost++
			continue
		}
		if len(finished[id]) > 1 {
			doubles++
		}
		if len(claims[id]) > 1 {
			reclaimed++
		}
		// Finished by the identity that claimed it last, as it says.
		require.Equal(t, holder, result, id)
		if len(finished[id]) == 1 {
			require.Equal(t, holder, finished[id][0], "%s finished by another than its holder", id)
		}
		cs := claims[id]
		if len(cs) > 0 {
			last := slices.MaxFunc(cs, func(a, b claim) int { return int(a.at - b.at) })
			require.Equal(t, last.who, holder, "%s: finished by %s, but the last claim was %s's (%v)", id, holder, last.who, cs)
		}
	}
	require.NoError(t, rows.Err())
	t.Logf("chaos: %d actions, %d processes started, %d SIGKILLs, %d SIGSTOPs (%d longer than the %v lease); %d actions claimed more than once, %d finishes refused, %d identities departed by the board; %d posts refused as locked and tried again; lost %d, doubles %d; %v",
		total, len(all), kills, stops, long, lease, reclaimed, refused, departed, lockedPosts.Load(), lost, doubles, elapsed.Round(time.Millisecond))
	require.Zero(t, lost, "actions not done")
	require.Zero(t, doubles, "actions finished twice")
	require.Positive(t, kills+stops, "the chaos struck")
}
