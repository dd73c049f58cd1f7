package pgboard

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/internal/logkey"
)

// An event says what a commit changed, and so whom it wakes.
type event int

const (
	// evChanged: an action changed in a way only Changes cares about (a
	// claim).
	evChanged event = iota
	// evClaimable: an action may have become claimable (posted, released,
	// reclaimed, re-addressed).
	evClaimable
	// evEnded: an action ended; its poster's waiters and Await care.
	evEnded
)

// channel names the NOTIFY channel of ev on this board.
func (b *Board) channel(ev event) string {
	switch ev {
	case evClaimable:
		return "bee_wake_" + b.id
	case evEnded:
		return "bee_ended_" + b.id
	}
	return "bee_change_" + b.id
}

// notify queues ev's notification in tx: PostgreSQL delivers it when tx
// commits, and never when it rolls back.
func (b *Board) notify(ctx context.Context, tx pgx.Tx, ev event) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, b.channel(ev))
	return err
}

// A listener carries wake-ups between processes: one dedicated connection
// LISTENs on the board's channels and fans each notification out to the
// Board's local waiters by closing a broadcast channel. Notifications are
// hints: when the connection is lost it is re-made with backoff, and every
// waiter is woken then, since a notification may have been missed.
//
// Claims matter only to Changes (bee watch), and hearing of every claim
// would wake every bridge, so the listener LISTENs on the change channel
// only once this Board has run Changes.
type listener struct {
	b   *Board
	cfg *pgx.ConnConfig

	mu        sync.Mutex    // guards the rest
	wake      chan struct{} // closed when an action may have become claimable
	ended     chan struct{} // closed when an action has ended
	change    chan struct{} // closed on any change
	watch     bool          // LISTEN on the change channel too
	watching  chan struct{} // closed once the change channel is listened to
	interrupt context.CancelFunc
	up        bool // connected and listening
}

func newListener(b *Board, cfg *pgx.ConnConfig) *listener {
	return &listener{
		b:        b,
		cfg:      cfg.Copy(),
		wake:     make(chan struct{}),
		ended:    make(chan struct{}),
		change:   make(chan struct{}),
		watching: make(chan struct{}),
	}
}

// run listens until the Board closes, reconnecting with backoff (up to 5 s
// between attempts) whenever the connection is lost.
func (l *listener) run() {
	ctx := l.b.ctx
	log := l.b.log
	for n := 0; ctx.Err() == nil; {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		wasUp := l.up
		l.up = false
		l.mu.Unlock()
		if wasUp {
			n = 0
			log.Warn("board listener lost its connection; reconnecting", logkey.Err, l.b.scrub(err))
		} else {
			log.Debug("board listener cannot connect; retrying", logkey.Err, l.b.scrub(err))
		}
		d := min(100*time.Millisecond<<min(n, 6), 5*time.Second)
		n++
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session connects, listens and dispatches notifications until the
// connection fails or ctx ends.
func (l *listener) session(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.ConnectTimeout+time.Second)
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ev := range []event{evClaimable, evEnded} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.b.channel(ev)}.Sanitize()); err != nil {
			return err
		}
	}
	changeOn := false
	l.mu.Lock()
	l.up = true
	l.mu.Unlock()
	// Something may have happened while nobody listened.
	l.broadcastAll()
	for {
		l.mu.Lock()
		watch := l.watch
		l.mu.Unlock()
		if watch && !changeOn {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.b.channel(evChanged)}.Sanitize()); err != nil {
				return err
			}
			changeOn = true
			l.mu.Lock()
			select {
			case <-l.watching:
			default:
				close(l.watching)
			}
			l.mu.Unlock()
		}
		wctx, interrupt := context.WithCancel(ctx)
		l.mu.Lock()
		l.interrupt = interrupt
		l.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		interrupted := wctx.Err() != nil && ctx.Err() == nil
		interrupt()
		if interrupted {
			continue // asked to LISTEN on more
		}
		if err != nil {
			return err
		}
		switch n.Channel {
		case l.b.channel(evClaimable):
			l.broadcast(evClaimable)
		case l.b.channel(evEnded):
			l.broadcast(evEnded)
		default:
			l.broadcast(evChanged)
		}
	}
}

// watchChanges makes the listener hear of every change (claims too), and
// waits a little for it to take effect; should the connection be down, the
// change channel is listened to once it is back.
func (l *listener) watchChanges() {
	l.mu.Lock()
	first := !l.watch
	l.watch = true
	interrupt, watching := l.interrupt, l.watching
	l.mu.Unlock()
	if first && interrupt != nil {
		interrupt()
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-watching:
	case <-t.C:
	case <-l.b.ctx.Done():
	}
}

// wakeCh returns the channel closed at the next claimable change. Take it
// before looking at the database, so a change made after the look is never
// missed.
func (l *listener) wakeCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake
}

// endedCh returns the channel closed when an action next ends.
func (l *listener) endedCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// changeCh returns the channel closed at the next change of any kind.
func (l *listener) changeCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.change
}

// broadcast wakes the local waiters ev concerns.
func (l *listener) broadcast(ev event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.change)
	l.change = make(chan struct{})
	switch ev {
	case evClaimable:
		close(l.wake)
		l.wake = make(chan struct{})
	case evEnded:
		close(l.ended)
		l.ended = make(chan struct{})
	}
}

// broadcastAll wakes every local waiter: something may have been missed.
func (l *listener) broadcastAll() {
	l.broadcast(evClaimable)
	l.broadcast(evEnded)
}
