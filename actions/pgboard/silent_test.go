package pgboard

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/pgtest"
	"github.com/tractat-us/bee/internal/testtime"
)

// silentSlack is how long past its bound a call may return on a silent
// server: the design allows well under a second; this is generous, for a
// loaded machine.
func silentSlack() time.Duration { return testtime.Bound(1500 * time.Millisecond) }

// Every wait returns within its own timeout, and every call within its
// context's deadline, whatever the server does: here it falls silent (as
// when stopped with SIGSTOP, or cut off) while the board is open. The
// bounds are shorter than the board's retry bound (15 s) and the commit's
// (5 s), which must not outlast them.
func TestBoard_CallsBoundedOnSilentServer(t *testing.T) {
	t.Parallel()
	pgtest.SkipShort(t)
	c := pgtest.Shared(t)
	proxy := pgtest.NewSilentProxy(t, c)
	b := openTest(t, proxy.URL(c.URL(c.NewDB(t))), nil)
	who := mint(t, "w")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who, PID: 1}))
	rec := post(t, b, "known")
	mine, err := b.Post(t.Context(), actions.Poster(who), actions.Draft{Title: "mine"})
	require.NoError(t, err)
	cursor, err := b.Head(t.Context())
	require.NoError(t, err)
	p, err := b.Next(t.Context(), who, "", time.Second) // claimed: the waits below find nothing
	require.NoError(t, err)
	require.Len(t, p.Records, 1)

	proxy.Quiet()
	const bound = 2 * time.Second
	long := testtime.Bound(time.Minute) // a wait's timeout its context's deadline cuts short
	for _, tc := range []struct {
		name     string
		deadline bool // the bound is the context's deadline, not the wait's timeout
		call     func(ctx context.Context) error
	}{
		{"await", false, func(ctx context.Context) error {
			_, err := b.Await(ctx, "user:alice", []string{rec.ID}, bound)
			return err
		}},
		{"await by its context", true, func(ctx context.Context) error {
			_, err := b.Await(ctx, "user:alice", []string{rec.ID}, long)
			return err
		}},
		{"next", false, func(ctx context.Context) error {
			_, err := b.Next(ctx, who, "", bound)
			return err
		}},
		{"next by its context", true, func(ctx context.Context) error {
			_, err := b.Next(ctx, who, "", long)
			return err
		}},
		{"notice", false, func(ctx context.Context) error {
			_, _, err := b.Notice(ctx, who, nil, bound)
			return err
		}},
		{"changes", false, func(ctx context.Context) error {
			_, err := b.Changes(ctx, cursor, bound)
			return err
		}},
		{"post", true, func(ctx context.Context) error {
			_, err := b.Post(ctx, "user:alice", actions.Draft{Title: "lost"})
			return err
		}},
		{"finish", true, func(ctx context.Context) error {
			_, err := b.Finish(ctx, who, p.Records[0].ID, "ok")
			return err
		}},
		{"cancel", true, func(ctx context.Context) error {
			_, err := b.Cancel(ctx, actions.Poster(who), mine.ID, "no longer")
			return err
		}},
		{"get", true, func(ctx context.Context) error {
			_, err := b.Get(ctx, rec.ID)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, bound)
				defer cancel()
			}
			start := time.Now()
			err := tc.call(ctx)
			took := time.Since(start)
			t.Logf("%s on a silent server: returned after %v: %v", tc.name, took.Round(time.Millisecond), err)
			require.Less(t, took, bound+silentSlack(), "within its bound")
			if err != nil && ctx.Err() == nil {
				require.ErrorIs(t, err, ErrUnreachable, "an error says the server did not answer")
			}
		})
	}

	// Once the server speaks again, nothing done under the silence is
	// lost or doubled: the finish and the cancel were never sent (or are
	// resolved), and the board answers again.
	proxy.Speak()
	got, err := b.Get(t.Context(), p.Records[0].ID)
	require.NoError(t, err)
	t.Logf("%s after the silence: %s", got.ID, got.State)
}

// A cutOff is a board (b) through a proxy that falls silent right before
// the COMMIT of the first write transaction after it is armed, and
// another board of the same database (other) that reaches the server
// directly.
type cutOff struct {
	b, other *Board
	proxy    *pgtest.SilentProxy
	armed    atomic.Bool
	cut      chan struct{} // closed when the proxy falls silent
}

// eachCutOff runs test, in parallel, for a commit cut off that reaches
// the server once it speaks again, and for one that never arrives (the
// proxy drops it); test returns what to check once the proxy has done
// either. armOnClaim arms the cut at the first claim of b's (inside its
// transaction), else the test arms it.
func eachCutOff(t *testing.T, armOnClaim bool, test func(t *testing.T, x *cutOff) (after func(t *testing.T))) {
	pgtest.SkipShort(t)
	for _, committed := range []bool{true, false} {
		name := "its answer comes late"
		if !committed {
			name = "it never arrives"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := pgtest.Shared(t)
			url := c.URL(c.NewDB(t))
			x := &cutOff{proxy: pgtest.NewSilentProxy(t, c), cut: make(chan struct{})}
			var once sync.Once
			opts := &Options{beforeCommit: func() {
				if x.armed.Load() {
					once.Do(func() {
						x.proxy.Quiet()
						close(x.cut)
					})
				}
			}}
			if armOnClaim {
				opts.inClaim = func(uint32) { x.armed.Store(true) }
			}
			x.b = openTest(t, x.proxy.URL(url), opts)
			x.other = openTest(t, url, nil)
			after := test(t, x)
			if committed {
				x.proxy.Speak()
			} else {
				x.proxy.Cut()
			}
			after(t)
		})
	}
}

// A claim whose commit was sent just before the server fell silent, and
// whose answer never came by the wait's timeout, is neither lost nor
// doubled: the wait returns by its timeout without it, and the claim, if
// it committed (its COMMIT arrives once the server speaks again), is given
// back, so that the next wait, by another identity, gets it, exactly once;
// if it never arrived, the action stayed open.
func TestBoard_ClaimCutOffAtCommit(t *testing.T) {
	t.Parallel()
	eachCutOff(t, true, func(t *testing.T, x *cutOff) func(t *testing.T) {
		a := post(t, x.other, "job")
		who := mint(t, "w")
		const timeout = 2 * time.Second
		start := time.Now()
		p, err := x.b.Next(t.Context(), who, "", timeout)
		took := time.Since(start)
		<-x.cut
		t.Logf("a Next whose claim's commit went unanswered returned after %v: %d records, %v", took.Round(time.Millisecond), len(p.Records), err)
		require.Less(t, took, timeout+silentSlack(), "within its timeout")
		require.NoError(t, err, "a wait whose timeout passed found nothing")
		require.Empty(t, p.Records, "nothing delivered to a call that gave up")

		return func(t *testing.T) {
			// Another identity, on another board, gets it once it is
			// given back (or at once, when it stayed open).
			thief := mint(t, "thief")
			q, err := x.other.Next(t.Context(), thief, "", testtime.Bound(30*time.Second))
			require.NoError(t, err)
			require.Len(t, q.Records, 1, "the action was not lost")
			require.Equal(t, a.ID, q.Records[0].ID)
			require.Equal(t, string(thief), q.Records[0].Holder)
			_, err = x.other.Finish(t.Context(), thief, a.ID, "ok")
			require.NoError(t, err)
			_, err = x.b.Finish(t.Context(), who, a.ID, "again")
			require.Error(t, err, "done once: who never held it when thief finished")
			r, err := x.other.Get(t.Context(), a.ID)
			require.NoError(t, err)
			require.Equal(t, actions.Done, r.State)
			require.Equal(t, "ok", r.Result)
		}
	})
}

// An outcome whose telling's commit was sent just before the server fell
// silent, and whose answer never came by the wait's timeout, is not lost:
// the wait returns by its timeout without it, and the poster hears it at
// its next wait, once, whether the telling committed late (it is marked
// untold again) or never arrived.
func TestBoard_TellingCutOffAtCommit(t *testing.T) {
	t.Parallel()
	eachCutOff(t, false, func(t *testing.T, x *cutOff) func(t *testing.T) {
		poster := mint(t, "poster")
		require.NoError(t, x.b.Join(t.Context(), actions.Member{ID: poster, PID: 1}))
		a, err := x.b.Post(t.Context(), actions.Poster(poster), actions.Draft{Title: "job"})
		require.NoError(t, err)
		worker := mint(t, "worker")
		p, err := x.other.Next(t.Context(), worker, "", testtime.Bound(10*time.Second))
		require.NoError(t, err)
		require.Len(t, p.Records, 1)
		_, err = x.other.Finish(t.Context(), worker, a.ID, "ok")
		require.NoError(t, err)

		x.armed.Store(true)
		const timeout = 2 * time.Second
		start := time.Now()
		n, ok, err := x.b.Notice(t.Context(), poster, nil, timeout)
		took := time.Since(start)
		<-x.cut
		t.Logf("a Notice whose telling's commit went unanswered returned after %v: %v %v", took.Round(time.Millisecond), ok, err)
		require.Less(t, took, timeout+silentSlack(), "within its timeout")
		require.NoError(t, err, "a wait whose timeout passed found nothing")
		require.False(t, ok, "nothing told to a call that gave up: %+v", n)

		return func(t *testing.T) {
			n, ok, err := x.b.Notice(t.Context(), poster, nil, testtime.Bound(30*time.Second))
			require.NoError(t, err)
			require.True(t, ok, "the outcome was not lost")
			require.Equal(t, actions.NoticeOutcome, n.Kind)
			require.Equal(t, a.ID, n.Record.ID)
			require.Equal(t, actions.Done, n.Record.State)
			_, ok, err = x.b.Notice(t.Context(), poster, nil, 0)
			require.NoError(t, err)
			require.False(t, ok, "told once")
		}
	})
}
