package pgboard

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// machines are network namespaces joined by veth pairs to a bridge of the
// test's own, each a "machine" with its own address on a private /24; the
// PostgreSQL server listens on the bridge's address. Bridges run inside
// them with a host key of their own, so they judge each other by lease
// alone, as on separate machines.
type machines struct {
	server string   // the bridge's address, where the server listens
	ns     []string // the namespaces
}

// newMachines makes n namespaces, removed when t ends (also when it
// fails). It needs root and iproute2: without them it skips, or fails
// under CI=true.
func newMachines(t *testing.T, n int) *machines {
	t.Helper()
	if os.Geteuid() != 0 {
		pgtest.Unavailable(t, errors.New("network namespaces need root"))
	}
	if _, err := exec.LookPath("ip"); err != nil {
		pgtest.Unavailable(t, fmt.Errorf("network namespaces need iproute2 (ip): %w", err))
	}
	var raw [3]byte
	_, _ = rand.Read(raw[:])
	tag := fmt.Sprintf("%02x%02x", raw[0], raw[1])
	subnet := fmt.Sprintf("10.%d.%d", 200+int(raw[2])%50, raw[0])
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	bridge := "beebr" + tag
	m := &machines{server: subnet + ".1"}
	t.Cleanup(func() {
		for _, ns := range m.ns {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
		_ = exec.Command("ip", "link", "del", bridge).Run()
	})
	ip("link", "add", bridge, "type", "bridge")
	ip("addr", "add", m.server+"/24", "dev", bridge)
	ip("link", "set", bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("bee-%s-%d", tag, i)
		host, peer := fmt.Sprintf("beeh%s%d", tag, i), fmt.Sprintf("beep%s%d", tag, i)
		ip("netns", "add", ns)
		m.ns = append(m.ns, ns)
		ip("link", "add", host, "type", "veth", "peer", "name", peer)
		ip("link", "set", peer, "netns", ns)
		ip("link", "set", host, "master", bridge)
		ip("link", "set", host, "up")
		ip("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", subnet, 10+i), "dev", peer)
		ip("-n", ns, "link", "set", peer, "up")
		ip("-n", ns, "link", "set", "lo", "up")
	}
	return m
}

// in is the command prefix that runs a process in namespace i.
func (m *machines) in(i int) []string { return []string{"ip", "netns", "exec", m.ns[i]} }

// Several bridges on separate "machines" share one board over a virtual
// link. Under load, with bridges SIGKILLed mid-run, every action is done
// exactly once: a claim is taken again only after its holder was killed
// (its lease ran out), and is finished by the identity that claimed it
// last.
func TestMachines_ExactlyOnceWithKills(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	m := newMachines(t, 3)
	c, err := pgtest.Start(&pgtest.Options{Listen: []string{m.server}})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Stop()
	db := c.NewDB(t)
	url := c.URLFor(db, "bee_admin", "", m.server)
	b := openTest(t, c.URL(db), nil)

	// A killed bridge's claims come back this long after its last renewal;
	// a live one must renew in time on a busy machine too, so it is
	// stretched as the bounds are.
	lease := int(testtime.Bound(1500 * time.Millisecond).Milliseconds())
	start := func(i int) *boardtest.Proc {
		p := boardtest.StartProcUnder(t, m.in(i), "claimer", url, boardtest.EnvWaiters+"=2", boardtest.EnvLease+"="+strconv.Itoa(lease),
			envHost+"=machine-"+strconv.Itoa(i), boardtest.EnvMS+"=10")
		p.Expect("ready", 60*time.Second)
		return p
	}
	procs := []*boardtest.Proc{start(0), start(1), start(2)}
	total := 300
	for i := range total {
		_, err := b.Post(t.Context(), "user:tester", actions.Draft{Title: fmt.Sprintf("job %d", i)})
		require.NoError(t, err)
	}
	done := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM bee_every_action WHERE state = 'done'`).Scan(&n))
		return n
	}
	// SIGKILL a bridge on two machines while they work, and start a new
	// one there each time.
	var killedLines [][]string
	for round, victim := range []int{0, 1} {
		require.Eventually(t, func() bool { return done() >= (round+1)*total/4 }, testtime.Bound(60*time.Second), 5*time.Millisecond)
		killedLines = append(killedLines, procs[victim].Kill())
		procs[victim] = start(victim)
	}
	require.Eventually(t, func() bool { return done() == total }, testtime.Bound(120*time.Second), 50*time.Millisecond, "every action done")

	// Who claimed what, by the reports of the bridges.
	claims := map[string][]string{} // action id -> identities that reported claiming it, in order
	killed := map[string]bool{}     // identities of killed bridges
	record := func(lines []string, dead bool) {
		for _, c := range boardtest.Claims(lines) {
			claims[c.ID] = append(claims[c.ID], c.Who)
			if dead {
				killed[c.Who] = true
			}
		}
	}
	for _, lines := range killedLines {
		record(lines, true)
	}
	for _, p := range procs {
		record(p.Finish(60*time.Second), false)
	}
	rows, err := b.pool.Query(t.Context(), `SELECT seq, state, holder, result FROM bee_every_action`)
	require.NoError(t, err)
	defer rows.Close()
	n, again := 0, 0
	for rows.Next() {
		var seq int64
		var state, holder, result string
		require.NoError(t, rows.Scan(&seq, &state, &holder, &result))
		id := position.ActionID(seq)
		require.Equal(t, "done", state, id)
		require.Equal(t, holder, result, "%s finished once, by its holder", id)
		got := claims[id]
		require.NotEmpty(t, got, "%s finished by %s, which never reported claiming it", id, holder)
		require.Equal(t, holder, got[len(got)-1], "%s finished by the identity that claimed it last", id)
		for _, earlier := range got[:max(len(got)-1, 0)] {
			require.True(t, killed[earlier], "%s claimed by %s and again by %s, though %s was not killed", id, earlier, holder, earlier)
			again++
		}
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, total, n)
	t.Logf("%d actions done exactly once by bridges on 3 machines; 2 bridges SIGKILLed, %d claims taken again after their lease ran out",
		total, again)
}

// A post on one "machine" wakes a bridge waiting on another within
// milliseconds, through NOTIFY over the virtual link (the waiter's safety
// poll is 30 s).
func TestMachines_PostToWake(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	m := newMachines(t, 2)
	c, err := pgtest.Start(&pgtest.Options{Listen: []string{m.server}})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Stop()
	url := c.URLFor(c.NewDB(t), "bee_admin", "", m.server)
	openTest(t, url, nil).Close() // migrate before the bridges start

	waiter := boardtest.StartProcUnder(t, m.in(0), "waiter", url, envHost+"=machine-0")
	poster := boardtest.StartProcUnder(t, m.in(1), "poster", url, envHost+"=machine-1")
	poster.Expect("ready", 60*time.Second)
	var lat []time.Duration
	for range 10 {
		waiter.Expect("sleeping", 60*time.Second)
		poster.Send("post now")
		f := strings.Fields(waiter.Expect("got ", 30*time.Second))
		require.Len(t, f, 4)
		t0, err := strconv.ParseInt(strings.TrimPrefix(f[3], "t0="), 10, 64)
		require.NoError(t, err)
		woke, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		d := time.Duration(woke - t0)
		require.Less(t, d, testtime.Bound(5*time.Second), "woken by NOTIFY, not the 30 s safety poll")
		lat = append(lat, d)
	}
	slices.Sort(lat)
	t.Logf("post on one machine to claim on another: p50 %v, max %v (10 rounds)", lat[len(lat)/2], lat[len(lat)-1])
	poster.Finish(30 * time.Second)
	waiter.Finish(30 * time.Second)
}
