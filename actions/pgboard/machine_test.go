package pgboard

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// Claims that queue while the machine's claimer sends its batches go
// together in its next ones, from its own Board and from another, and
// each action is claimed once, by the claimant that asked.
func TestMachine_ClaimsQueuedGoInOneBatch(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	var held atomic.Int64 // claims in batches the hook holds
	a := openTest(t, url, &Options{MachineClaimer: true, beforeBatch: func(n int) {
		held.Add(int64(n))
		<-hold
	}})
	other := openTest(t, url, &Options{MachineClaimer: true})
	t.Cleanup(release) // before the Boards close
	const each = 3
	for range 2*each + 1 {
		post(t, a, "job")
	}
	whoOf := func(b *Board, i int) identity.ID {
		who := mint(t, fmt.Sprintf("m%d", i))
		require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
		return who
	}
	type claim struct {
		who identity.ID
		got []actions.Record
		err error
	}
	results := make(chan claim, 2*each+1)
	next := func(b *Board, who identity.ID) {
		p, err := b.Next(t.Context(), who, "", testtime.Bound(10*time.Second))
		results <- claim{who, p.Records, err}
	}
	// The first claim makes a the claimer; its batches are held until
	// every claim has queued or is held.
	first := whoOf(a, 0)
	go next(a, first)
	require.Eventually(t, func() bool { return held.Load() == 1 }, testtime.Bound(10*time.Second), time.Millisecond)
	m := a.machine.Load()
	require.NotNil(t, m, "the first claim made a the machine's claimer")
	for i := range each {
		go next(a, whoOf(a, 1+i))
		go next(other, whoOf(other, 1+each+i))
	}
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return int64(len(m.queue))+held.Load() == 2*each+1
	}, testtime.Bound(10*time.Second), time.Millisecond, "the other claims queue behind the held batches")
	release()
	claimed := map[string]identity.ID{}
	for range 2*each + 1 {
		r := <-results
		require.NoError(t, r.err)
		require.Len(t, r.got, 1, "%s claimed one action", r.who)
		rec := r.got[0]
		require.Equal(t, string(r.who), rec.Holder)
		require.NotContains(t, claimed, rec.ID, "%s claimed twice", rec.ID)
		claimed[rec.ID] = r.who
	}
	// Of the six that came behind the first, the other connection may
	// have taken one alone: the rest went in one batch.
	require.GreaterOrEqual(t, m.maxSeen.Load(), int64(2*each-1), "the queued claims went in one batch")
	require.Equal(t, int64(2*each+1), m.claims.Load())
	require.Nil(t, other.machine.Load(), "the other Board claimed through a's claimer")
	all, err := a.ListFiltered(t.Context(), "", actions.ListFilter{States: []actions.State{actions.Claimed}})
	require.NoError(t, err)
	require.Len(t, all.Records, 2*each+1)
}

// A Board claims alone unless asked to use the machine's claimer.
func TestMachine_OffByDefault(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	if os.Getenv(EnvClaimer) == "on" {
		t.Skipf("%s=on turns the claimer on for every Board", EnvClaimer)
	}
	b := openTest(t, url, nil)
	require.Empty(t, b.machineName)
	who := mint(t, "alone")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	mine := post(t, b, "job")
	p, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	require.Equal(t, mine.ID, p.Records[0].ID)
	require.Nil(t, b.machine.Load())
}

// envMachine names what the "machine-claimer" role's claimer does with
// a batch: "die-after-commit" (exit once it committed, before anyone
// hears) or "hang" (wait before sending it until told "go").
const envMachine = "BEE_PGBOARD_TEST_MACHINE"

// roleMachineClaimer becomes its machine's claimer (its first claim
// finds nothing), says "ready", and serves until stdin closes; "go"
// lets a hung batch go.
func roleMachineClaimer(ctx context.Context, b *Board, out *boardtest.Out, cmds <-chan string) error {
	who, err := identity.Mint("machine")
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	if _, err := b.Next(ctx, who, "", 0); err != nil {
		return err
	}
	if m := b.machine.Load(); m == nil || m.stopped() {
		return fmt.Errorf("not the machine's claimer after a claim")
	}
	roleArmed.Store(true)
	out.Say("ready")
	defer letHungGo()
	for cmd := range cmds {
		if cmd == "go" {
			letHungGo()
		}
	}
	return nil
}

// hangRelease lets the "hang" role's batch go; roleArmed: the role's
// own first claim is behind it, and its hooks act.
var (
	roleArmed   atomic.Bool
	hangRelease = make(chan struct{})
	letHungGo   = sync.OnceFunc(func() { close(hangRelease) })
)

// machineRoleOptions sets the hooks envMachine asks for.
func machineRoleOptions(o *Options, out *boardtest.Out) {
	o.MachineClaimer = true
	switch os.Getenv(envMachine) {
	case "die-after-commit":
		o.afterBatch = func(int) {
			if roleArmed.Load() {
				os.Exit(7)
			}
		}
	case "hang":
		o.beforeBatch = func(int) {
			if !roleArmed.Load() {
				return
			}
			out.Say("hanging")
			<-hangRelease
		}
	}
}

// withMachineClaimer starts a process that is the machine's claimer of a
// new board, doing what envMachine says, and opens a Board there that
// claims through it, with a claimant joined.
func withMachineClaimer(t *testing.T, does string) (*boardtest.Proc, *Board, identity.ID) {
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	p := boardtest.StartProc(t, "machine-claimer", url, envMachine+"="+does)
	p.Expect("ready", testtime.Bound(30*time.Second))
	b := openTest(t, url, &Options{MachineClaimer: true})
	who := mint(t, "claimant")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: os.Getpid()}))
	return p, b, who
}

// A claimant whose claimer dies after its batch committed, before it
// answered, settles the claim by its token: it has the action, once.
func TestMachine_ClaimerDiesAfterCommit(t *testing.T) {
	t.Parallel()
	p, b, who := withMachineClaimer(t, "die-after-commit")
	mine := post(t, b, "job")
	got, err := b.Next(t.Context(), who, "", testtime.Bound(20*time.Second))
	require.NoError(t, err)
	require.Len(t, got.Records, 1, "the claim the dead claimer committed is the claimant's")
	require.Equal(t, mine.ID, got.Records[0].ID)
	require.Equal(t, string(who), got.Records[0].Holder)
	p.FinishFailing(testtime.Bound(10 * time.Second))
	again, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Empty(t, again.Records, "nothing else was claimed")
	rec, err := b.Get(t.Context(), mine.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Claimed, rec.State)
	require.Equal(t, string(who), rec.Holder)
}

// A claimer that stops (SIGSTOP) holds nobody up for long: a claimant
// that has not had its first word claims on its own.
func TestMachine_StoppedClaimer(t *testing.T) {
	t.Parallel()
	p, b, who := withMachineClaimer(t, "")
	mine := post(t, b, "job")
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGSTOP))
	defer func() { _ = syscall.Kill(p.Pid(), syscall.SIGCONT) }()
	start := time.Now()
	got, err := b.Next(t.Context(), who, "", testtime.Bound(20*time.Second))
	require.NoError(t, err)
	require.Len(t, got.Records, 1)
	require.Equal(t, mine.ID, got.Records[0].ID)
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second), "the claimant did not wait out the stopped claimer")
	require.Nil(t, b.machine.Load(), "the claimant did not become the claimer: the stopped one holds the socket")
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGCONT))
	p.Finish(testtime.Bound(10 * time.Second))
}

// A claimer whose batch hangs after its claimant sent the request: the
// claimant, at its commit's bound, ends the claimer's connection, finds
// nothing claimed by its token, and claims on its own; the hung batch,
// let go, can claim nothing.
func TestMachine_HungBatch(t *testing.T) {
	t.Parallel()
	p, b, who := withMachineClaimer(t, "hang")
	first := post(t, b, "first")
	second := post(t, b, "second")
	got, err := b.Next(t.Context(), who, "", testtime.Bound(30*time.Second))
	require.NoError(t, err)
	p.Expect("hanging", testtime.Bound(10*time.Second))
	require.Len(t, got.Records, 1)
	require.Equal(t, first.ID, got.Records[0].ID)
	p.Send("go")
	p.Finish(testtime.Bound(10 * time.Second))
	rec, err := b.Get(t.Context(), second.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Open, rec.State, "the hung batch claimed nothing once let go")
}
