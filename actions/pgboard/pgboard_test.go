package pgboard

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/actions/internal/position"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

var mint = boardtest.Mint

func post(t *testing.T, b *Board, title string) actions.Record {
	t.Helper()
	r, err := b.Post(t.Context(), "user:alice", actions.Draft{Title: title})
	require.NoError(t, err)
	return r
}

func TestOpen_Location(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]string{
		"postgres://bee:s3cret@db.example:5432/bee?sslmode=require": {"postgres://bee@db.example:5432/bee?sslmode=require", "s3cret"},
		"postgresql://bee@db/bee":                                   {"postgresql://bee@db/bee", ""},
		"postgres://db/bee?password=s3cret&sslmode=disable":         {"postgres://db/bee?sslmode=disable", "s3cret"},
		"postgres://bee:s3%2Fcret@db/bee":                           {"postgres://bee@db/bee", "s3/cret"},
	} {
		loc, pw := redactURL(in)
		require.Equal(t, want[0], loc, in)
		require.Equal(t, want[1], pw, in)
	}
	for _, bad := range []string{"/tmp/board.db", "mysql://x@y/z"} {
		_, err := Open(bad, nil)
		require.ErrorContains(t, err, "not a postgres:// or postgresql:// URL")
	}
	_, err := Open("postgres://bee:s3cret@db/bee?sslmode=bogus", nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	_, err = Open("postgres://x@y/z", &Options{Lease: time.Second, Renew: 600 * time.Millisecond})
	require.ErrorContains(t, err, "at most half the lease")
}

// A wrong password is refused with an error that names the role and the
// server and never the password; the right one opens the board, whose
// Location has no password either.
func TestOpen_WrongPassword(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	if !c.Owned() {
		t.Skip("needs the password role of a cluster the test started") // an external server's roles are unknown
	}
	db := c.NewDBFor(t, pgtest.PasswordRole)
	for _, wrong := range []string{"not-the-password", c.Password + "x"} {
		start := time.Now()
		_, err := Open(c.URLFor(db, pgtest.PasswordRole, wrong, ""), nil)
		require.ErrorIs(t, err, ErrLogin)
		require.ErrorContains(t, err, `refused role "bee_pw"`)
		require.ErrorContains(t, err, "check the user and password")
		require.NotContains(t, err.Error(), wrong)
		require.NotContains(t, err.Error(), c.Password)
		require.Less(t, time.Since(start), testtime.Bound(10*time.Second))
	}
	b := openTest(t, c.URLFor(db, pgtest.PasswordRole, c.Password, ""), nil)
	require.NotContains(t, b.Location(), c.Password)
	require.Contains(t, b.Location(), "postgres://bee_pw@127.0.0.1:")

	_, err := Open(c.URLFor("no_such_db", pgtest.PasswordRole, c.Password, ""), nil)
	require.ErrorContains(t, err, `database "no_such_db" does not exist`)
	require.ErrorContains(t, err, "createdb no_such_db")
	require.NotContains(t, err.Error(), c.Password)
}

// A server that is not there is reported within the connect timeout, with
// the address tried, and never the password.
func TestOpen_Unreachable(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: connections are refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	start := time.Now()
	_, err = Open("postgres://bee:s3cret-pw@"+addr+"/bee", &Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "nothing listens at "+addr)
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.Less(t, time.Since(start), testtime.Bound(5*time.Second))

	// A listener that never answers: the connect timeout bounds the wait.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	start = time.Now()
	_, err = Open("postgres://bee:s3cret-pw@"+silent.Addr().String()+"/bee", &Options{ConnectTimeout: time.Second})
	took := time.Since(start)
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorContains(t, err, "did not answer within 1s")
	require.NotContains(t, err.Error(), "s3cret-pw")
	t.Logf("a silent server reported after %v (connect timeout 1 s)", took)
	require.Less(t, took, testtime.Bound(5*time.Second))
}

// A database migrated by a newer bee is refused with what to do; one with
// a bee_actions table but no version is not taken for a board.
func TestOpen_SchemaRefusals(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	b := openTest(t, c.URL(db), nil)
	require.NoError(t, b.Close())
	require.NoError(t, c.Exec(t.Context(), db, `UPDATE bee_schema_version SET version = 99`))
	_, err := Open(c.URL(db), nil)
	require.ErrorIs(t, err, ErrNewerSchema)
	require.ErrorContains(t, err, "upgrade bee")
	require.ErrorContains(t, err, db)

	other := c.NewDB(t)
	require.NoError(t, c.Exec(t.Context(), other, `CREATE TABLE bee_actions (x int)`))
	_, err = Open(c.URL(other), nil)
	require.ErrorIs(t, err, ErrNotBoard)

	empty := c.NewDB(t)
	_, err = Open(c.URL(empty), &Options{NoCreate: true})
	require.ErrorIs(t, err, ErrNoBoard)
}

// Bridges starting together on a new database migrate it once.
func TestOpen_ConcurrentMigration(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	var wg sync.WaitGroup
	ids := make([]string, 6)
	errs := make([]error, 6)
	for i := range ids {
		wg.Go(func() {
			b, err := Open(url, nil)
			errs[i] = err
			if err == nil {
				ids[i] = b.id
				errs[i] = b.Close()
			}
		})
	}
	wg.Wait()
	for i := range ids {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i], "one board id")
	}
}

// A connection killed in the middle of a claim (pg_terminate_backend
// between locking the row and committing) loses nothing: the transaction is
// retried on another connection and the action is claimed once.
func TestBoard_ConnectionDroppedMidClaim(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	var once sync.Once
	killed := make(chan uint32, 1)
	b := openTest(t, url, &Options{inClaim: func(pid uint32) {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), testtime.Bound(10*time.Second))
			defer cancel()
			if err := c.Exec(ctx, "postgres", `SELECT pg_terminate_backend($1)`, pid); err != nil {
				panic(err)
			}
			killed <- pid
		})
	}})
	a := post(t, b, "job")
	who := mint(t, "w")
	p, err := b.Next(t.Context(), who, "", testtime.Bound(10*time.Second))
	require.NoError(t, err)
	t.Logf("claim's backend %d terminated mid-claim", <-killed)
	require.Len(t, p.Records, 1)
	require.Equal(t, a.ID, p.Records[0].ID)
	require.Equal(t, string(who), p.Records[0].Holder)

	other := openTest(t, url, nil)
	thief := mint(t, "thief")
	q, err := other.Next(t.Context(), thief, "", 0)
	require.NoError(t, err)
	require.Empty(t, q.Records, "claimed once")
	_, err = b.Finish(t.Context(), who, a.ID, "ok")
	require.NoError(t, err)
}

// Members on other machines are judged by their lease alone: their pids
// mean nothing here. A live one renews even while idle; one that stops
// renewing (its bridge died) loses its claims, and its liveness, once its
// lease runs out, to the millisecond. Time is a manual clock.
func TestBoard_OtherMachinesJudgedByLease(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	const lease, renew = 3 * time.Second, time.Second
	clock := boardtest.NewManualClock()
	opts := func(host string) *Options {
		return &Options{Lease: lease, Renew: renew, SafetyPoll: time.Hour, Clock: clock, hostKey: host}
	}
	here := openTest(t, url, opts(""))
	there := openTest(t, url, opts("elsewhere"))
	idle := mint(t, "idle")
	holder := mint(t, "holder")
	// Their pid is this process's, which runs; but "here" must not look
	// at it: on another machine a pid means nothing here.
	require.NoError(t, there.Join(t.Context(), actions.Member{ID: idle, PID: os.Getpid()}))
	require.NoError(t, there.Join(t.Context(), actions.Member{ID: holder, PID: os.Getpid()}))
	a := post(t, here, "job")
	require.Equal(t, a.ID, nextOne(t, there, holder).ID)

	// leases returns the lease ends "here" lists for idle and holder.
	leases := func() (idleEnd, holderEnd time.Time) {
		ms, err := here.Members(t.Context())
		if err != nil {
			return
		}
		for _, m := range ms {
			switch m.ID {
			case idle:
				idleEnd = m.LeaseUntil
			case holder:
				holderEnd = m.LeaseUntil
			}
		}
		return
	}
	// Four leases pass; each tick renews both, idle or not, and nobody
	// here can take the claim.
	for range 4 * lease / renew {
		clock.Advance(renew)
		want := clock.Now().Add(lease)
		require.Eventually(t, func() bool {
			i, h := leases()
			return i.Equal(want) && h.Equal(want)
		}, testtime.Bound(10*time.Second), time.Millisecond, "both renewed to %v", want)
		nothingNow(t, here, mint(t, "thief"))
	}
	_, err := here.Post(t.Context(), "user:alice", actions.Draft{To: string(idle), Title: "for the idle one"})
	require.NoError(t, err, "an idle member elsewhere is live")

	require.NoError(t, there.Close()) // its machine goes away without a word
	_, end := leases()
	heir := mint(t, "heir")
	require.NoError(t, here.Join(t.Context(), actions.Member{ID: heir, PID: os.Getpid()}))
	armed := clock.Pending()
	got := make(chan actions.Page, 1)
	go func() {
		defer close(got)
		p, err := here.Next(t.Context(), heir, "", 10*time.Second)
		if err == nil {
			got <- p
		}
	}()
	clock.BlockUntil(t, armed+1) // the heir sleeps until the leases' end

	clock.Advance(end.Sub(clock.Now()) - time.Millisecond)
	nothingNow(t, here, mint(t, "thief"))
	_, err = here.Post(t.Context(), "user:alice", actions.Draft{To: string(idle), Title: "still live"})
	require.NoError(t, err, "live until its lease's last millisecond")
	clock.Advance(2 * time.Millisecond)
	p, ok := <-got
	require.True(t, ok, "the heir's Next failed")
	require.Len(t, p.Records, 1, "woken by the lease's end, not the safety poll")
	require.Equal(t, a.ID, p.Records[0].ID, "reclaimed once the lease ran out")
	ms, err := here.Members(t.Context())
	require.NoError(t, err)
	for _, m := range ms {
		require.NotContains(t, []identity.ID{idle, holder}, m.ID, "departed when their leases ran out")
	}
	_, err = here.Post(t.Context(), "user:alice", actions.Draft{To: string(idle), Title: "too late"})
	require.ErrorIs(t, err, actions.ErrNotLive)
}

// A server restart gives every member a full lease before any is judged,
// counted on the board's clock: here one an hour ahead of the server's,
// which the skew measured at Open puts the restart on. Without it the
// restart would lie an hour in the board's past and grant nothing.
func TestBoard_RestartGivesALeaseOnTheBoardsClock(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	c, err := pgtest.Start(nil)
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Stop()
	url := c.URL(c.NewDB(t))
	const lease = 3 * time.Second
	clock := boardtest.NewManualClock()
	clock.Advance(time.Hour)
	opts := func(host string) *Options {
		return &Options{Lease: lease, SafetyPoll: time.Hour, Clock: clock, hostKey: host}
	}
	here := openTest(t, url, opts(""))
	there := openTest(t, url, opts("elsewhere"))
	holder := mint(t, "holder")
	require.NoError(t, there.Join(t.Context(), actions.Member{ID: holder, PID: os.Getpid()}))
	a := post(t, here, "job")
	require.Equal(t, a.ID, nextOne(t, there, holder).ID)
	require.NoError(t, there.Close()) // its renewals stop
	ms, err := here.Members(t.Context())
	require.NoError(t, err)
	require.Len(t, ms, 1)
	end := ms[0].LeaseUntil

	require.NoError(t, c.Restart())
	clock.Advance(end.Sub(clock.Now()))
	nothingNow(t, here, mint(t, "thief")) // the lease has run out, but not a lease since the restart

	// The restart lies as far after Open on the board's clock as it did on
	// the wall clock: seconds. A minute more and the claim goes back.
	clock.Advance(lease + time.Minute)
	require.Equal(t, a.ID, nextOne(t, here, mint(t, "heir")).ID)
}

func nextOne(t *testing.T, b *Board, who identity.ID) actions.Record {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", testtime.Bound(5*time.Second))
	require.NoError(t, err)
	require.Len(t, p.Records, 1)
	return p.Records[0]
}

func nothingNow(t *testing.T, b *Board, who identity.ID) {
	t.Helper()
	p, err := b.Next(t.Context(), who, "", 0)
	require.NoError(t, err)
	require.Empty(t, p.Records)
}

// A change committed while an older transaction still runs is reported
// once that transaction ends, not skipped.
func TestBoard_ChangesWaitForOlderTransactions(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	url := c.URL(c.NewDB(t))
	b := openTest(t, url, nil)
	head, err := b.Head(t.Context())
	require.NoError(t, err)

	// An older transaction holds an xid and stays open.
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), `SELECT pg_current_xact_id()`)
	require.NoError(t, err)

	a := post(t, b, "behind an older transaction")
	p, err := b.Changes(t.Context(), head, 200*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, p.Records, "not yet: the older transaction could still commit a lower rev")

	got := make(chan actions.Page, 1)
	go func() {
		p, err := b.Changes(t.Context(), head, testtime.Bound(10*time.Second))
		if err == nil {
			got <- p
		}
		close(got)
	}()
	require.NoError(t, tx.Rollback(t.Context()))
	p = <-got
	require.Len(t, p.Records, 1)
	require.Equal(t, a.ID, p.Records[0].ID)
}

// The server restarting under running bridges: they reconnect, nothing is
// lost and nothing is claimed twice, and a waiter is woken by a post after
// the restart without waiting for its safety poll.
func TestBoard_ServerRestart(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	c, err := pgtest.Start(nil)
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	defer c.Stop()
	url := c.URL(c.NewDB(t))
	sleeping := make(chan struct{}, 1)
	// The timeline is stretched as a whole: the bound < the wait < the poll.
	b := openTest(t, url, &Options{SafetyPoll: testtime.Bound(30 * time.Second), beforeSleep: func() {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	}})
	total := 600
	const procs = 3
	workers := make([]*boardtest.Proc, procs)
	for i := range workers {
		workers[i] = boardtest.StartProc(t, "claimer", url, boardtest.EnvWaiters+"=2")
	}
	for _, w := range workers {
		w.Expect("ready", 30*time.Second)
	}
	posted := 0
	postSome := func(n int) {
		for range n {
			_, err := b.Post(t.Context(), "user:tester", actions.Draft{Title: fmt.Sprintf("job %d", posted)})
			require.NoError(t, err)
			posted++
		}
	}
	postSome(total / 2)
	// Restart while the workers are busy with the first half.
	require.Eventually(t, func() bool {
		var done int
		err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM bee_every_action WHERE state = 'done'`).Scan(&done)
		return err == nil && done > 0
	}, testtime.Bound(30*time.Second), 5*time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Restart())
	t.Logf("server restarted in %v", time.Since(start))
	postSome(total - total/2)

	require.Eventually(t, func() bool {
		var open int
		err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM bee_every_action WHERE state <> 'done' AND from_whom = 'user:tester'`).Scan(&open)
		return err == nil && open == 0
	}, testtime.Bound(90*time.Second), 100*time.Millisecond, "every action done")

	gotBy := map[string]string{}
	for _, w := range workers {
		for _, c := range boardtest.Claims(w.Finish(30 * time.Second)) {
			prev, dup := gotBy[c.ID]
			require.False(t, dup, "%s claimed twice: by %s and %s", c.ID, prev, c.Who)
			gotBy[c.ID] = c.Who
		}
	}
	rows, err := b.pool.Query(t.Context(), `SELECT seq, holder, result FROM bee_every_action WHERE from_whom = 'user:tester'`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		var holder, result string
		require.NoError(t, rows.Scan(&seq, &holder, &result))
		id := position.ActionID(seq)
		require.Equal(t, gotBy[id], holder, "%s finished by the identity that claimed it", id)
		require.Equal(t, holder, result)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, total, n)

	// A waiter on this Board hears of a post after the restart.
	waiter := mint(t, "waiter")
	ch := make(chan actions.Page, 1)
	go func() {
		p, err := b.Next(t.Context(), waiter, "", testtime.Bound(20*time.Second))
		if err == nil {
			ch <- p
		}
		close(ch)
	}()
	select {
	case <-sleeping: // the post must wake it: the safety poll is 30 s away
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("the waiter never went to sleep")
	}
	start = time.Now()
	late := post(t, b, "after the restart")
	p := <-ch
	require.Len(t, p.Records, 1)
	require.Equal(t, late.ID, p.Records[0].ID)
	require.Less(t, time.Since(start), testtime.Bound(10*time.Second), "woken by the re-made listener, not the 30 s safety poll")
}
