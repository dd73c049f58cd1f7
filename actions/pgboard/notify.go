package pgboard

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/internal/wakeup"
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
// commits, and never when it rolls back. Its payload is key, whom it
// concerns (see package wakeup): a listener wakes only its local waiters
// that key concerns. An empty payload (as older bees send) concerns
// everyone.
func (b *Board) notify(ctx context.Context, tx pgx.Tx, ev event, key string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel(ev), key)
	return err
}

// keyOf is whom ev on rec concerns: for a claimable action those who may
// take it, for an ended one its poster.
func keyOf(ev event, rec actions.Record) string {
	switch ev {
	case evClaimable:
		return wakeup.ForRecipient(rec.To)
	case evEnded:
		return wakeup.ForPoster(rec.From)
	}
	return wakeup.Everyone
}

// A listener carries wake-ups between processes: one dedicated connection
// LISTENs on the board's channels and fans each notification out to the
// Board's local waiters it concerns (its payload says whom) by closing
// their channels. Notifications are
// hints: when the connection is lost it is re-made with backoff, and every
// waiter is woken then, since a notification may have been missed.
//
// Claims matter only to Changes (bee watch), and hearing of every claim
// would wake every bridge, so the listener LISTENs on the change channel
// only once this Board has run Changes.
type listener struct {
	b   *Board
	cfg *pgx.ConnConfig

	mu        sync.Mutex     // guards the rest
	wake      *wakeup.Signal // an action may have become claimable
	ended     *wakeup.Signal // an action has ended
	change    chan struct{}  // closed on any change
	watch     bool           // LISTEN on the change channel too
	watching  chan struct{}  // closed once the change channel is listened to
	interrupt context.CancelFunc
	up        bool // connected and listening
}

func newListener(b *Board, cfg *pgx.ConnConfig) *listener {
	return &listener{
		b:        b,
		cfg:      cfg.Copy(),
		wake:     wakeup.NewSignal(),
		ended:    wakeup.NewSignal(),
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
			l.broadcast(evClaimable, n.Payload)
		case l.b.channel(evEnded):
			l.broadcast(evEnded, n.Payload)
		default:
			l.broadcast(evChanged, wakeup.Everyone)
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

// wakeCh returns the channel closed at the next change that may make an
// action claimable by agent. Take it before looking at the database, so a
// change made after the look is never missed.
func (l *listener) wakeCh(agent string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake.ForAgent(agent)
}

// endedCh returns the channel closed when an action posted by one of
// agent's identities (or any action, when every is true) next ends.
func (l *listener) endedCh(agent string, every bool) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if every {
		return l.ended.Every()
	}
	return l.ended.ForAgent(agent)
}

// changeCh returns the channel closed at the next change of any kind.
func (l *listener) changeCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.change
}

// broadcast wakes the local waiters ev for key concerns.
func (l *listener) broadcast(ev event, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.change)
	l.change = make(chan struct{})
	switch ev {
	case evClaimable:
		l.wake.Fire(key)
	case evEnded:
		l.ended.Fire(key)
	}
}

// broadcastAll wakes every local waiter: something may have been missed.
func (l *listener) broadcastAll() {
	l.broadcast(evClaimable, wakeup.Everyone)
	l.broadcast(evEnded, wakeup.Everyone)
}
