package pgboard

import (
	"context"
	"hash/fnv"
	"strconv"
	"strings"
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

// channel names the NOTIFY channel of ev on this board that concerns
// everyone (an action for anyone; for evChanged, every change).
func (b *Board) channel(ev event) string {
	switch ev {
	case evClaimable:
		return "bee_wake_" + b.id
	case evEnded:
		return "bee_ended_" + b.id
	}
	return "bee_change_" + b.id
}

// channelFor names the NOTIFY channel of ev for key (see package wakeup):
// one channel per agent, so that PostgreSQL delivers a notification only to
// the Boards with a waiter it concerns, rather than wake every bridge on
// every machine to read a payload and go back to sleep. The agent's name
// is hashed to keep the name within PostgreSQL's 63 bytes; two agents
// whose hashes collide share a channel, and the payload tells them apart.
func (b *Board) channelFor(ev event, key string) string {
	if ev == evChanged || key == wakeup.Everyone {
		return b.channel(ev)
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return b.channel(ev) + "_" + strconv.FormatUint(h.Sum64(), 36)
}

// notify queues ev's notifications in tx: PostgreSQL delivers them when tx
// commits, and never when it rolls back. One goes to the channel of key,
// whom it concerns (see package wakeup), with key as its payload; one goes
// to the change channel, for those who watch every change (bee watch, the
// board page, Await for a person's actions).
//
// Bees before per-agent channels LISTEN only on the channels of everyone:
// during an upgrade they hear of addressed work and ends at their safety
// poll. Their own notifications still reach this bee, which listens there
// too.
func (b *Board) notify(ctx context.Context, tx pgx.Tx, ev event, key string) error {
	if ev == evChanged {
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, b.channel(evChanged))
		return err
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2), pg_notify($3, '')`,
		b.channelFor(ev, key), key, b.channel(evChanged))
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
// their channels. Notifications are hints: when the connection is lost it
// is re-made with backoff, and every waiter is woken then, since a
// notification may have been missed.
//
// It LISTENs on the channels of everyone from the start, and on an agent's
// own channels from the first time a waiter of that agent asks (a bridge:
// once, for its agent). The change channel carries every change, claims
// too, and would wake every bridge at every step of every action, so it is
// listened to only once this Board has run Changes or waits for every end.
type listener struct {
	b   *Board
	cfg *pgx.ConnConfig

	mu        sync.Mutex               // guards the rest
	wake      *wakeup.Signal           // an action may have become claimable
	ended     *wakeup.Signal           // an action has ended
	change    chan struct{}            // closed on any change
	wanted    map[string]chan struct{} // channels to LISTEN on, each to a channel closed once it first is
	interrupt context.CancelFunc
	up        bool // connected and listening
	heard     int  // notifications received, for tests
}

func newListener(b *Board, cfg *pgx.ConnConfig) *listener {
	l := &listener{
		b:      b,
		cfg:    cfg.Copy(),
		wake:   wakeup.NewSignal(),
		ended:  wakeup.NewSignal(),
		change: make(chan struct{}),
		wanted: make(map[string]chan struct{}),
	}
	for _, ev := range []event{evClaimable, evEnded} {
		l.wanted[b.channel(ev)] = make(chan struct{})
	}
	return l
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
	listening := make(map[string]bool) // on this connection
	for {
		if err := l.listenWanted(ctx, conn, listening); err != nil {
			return err
		}
		wctx, interrupt := context.WithCancel(ctx)
		l.mu.Lock()
		l.interrupt = interrupt
		// A channel wanted since listenWanted looked: want saw the old
		// interrupt, so listen to it before waiting.
		more := false
		for name := range l.wanted {
			more = more || !listening[name]
		}
		l.mu.Unlock()
		if more {
			interrupt()
			continue
		}
		n, err := conn.WaitForNotification(wctx)
		interrupted := wctx.Err() != nil && ctx.Err() == nil
		interrupt()
		if interrupted {
			continue // asked to LISTEN on more
		}
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.heard++
		l.mu.Unlock()
		switch {
		case strings.HasPrefix(n.Channel, l.b.channel(evClaimable)):
			l.broadcast(evClaimable, n.Payload)
		case strings.HasPrefix(n.Channel, l.b.channel(evEnded)):
			l.broadcast(evEnded, n.Payload)
		default:
			l.broadcast(evChanged, wakeup.Everyone)
		}
	}
}

// listenWanted LISTENs on each wanted channel that conn does not listen on
// yet, and says so to whoever waits for it. The first time on a connection
// it marks the listener up and wakes every waiter: something may have
// happened while nobody listened.
func (l *listener) listenWanted(ctx context.Context, conn *pgx.Conn, listening map[string]bool) error {
	l.mu.Lock()
	var todo []string
	for name := range l.wanted {
		if !listening[name] {
			todo = append(todo, name)
		}
	}
	l.mu.Unlock()
	for _, name := range todo {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
		listening[name] = true
	}
	l.mu.Lock()
	first := !l.up
	l.up = true
	for _, name := range todo {
		if done := l.wanted[name]; !wakeup.Closed(done) {
			close(done)
		}
	}
	l.mu.Unlock()
	if first {
		l.broadcastAll()
	}
	return nil
}

// want makes the listener LISTEN on the channels names, and waits a little
// for it to take effect, so that a waiter that asks before it looks at the
// database misses no notification. Should the connection be down, they are
// listened to once it is back (and every waiter is woken then).
func (l *listener) want(names ...string) {
	l.mu.Lock()
	var waits []chan struct{}
	for _, name := range names {
		done, ok := l.wanted[name]
		if !ok {
			done = make(chan struct{})
			l.wanted[name] = done
		}
		waits = append(waits, done)
	}
	interrupt, up := l.interrupt, l.up
	l.mu.Unlock()
	pending := false
	for _, done := range waits {
		pending = pending || !wakeup.Closed(done)
	}
	if !pending || !up {
		return
	}
	if interrupt != nil {
		interrupt()
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	for _, done := range waits {
		select {
		case <-done:
		case <-t.C:
			return
		case <-l.b.ctx.Done():
			return
		}
	}
}

// watchChanges makes the listener hear of every change (claims too).
func (l *listener) watchChanges() { l.want(l.b.channel(evChanged)) }

// wakeCh returns the channel closed at the next change that may make an
// action claimable by agent. Take it before looking at the database, so a
// change made after the look is never missed.
func (l *listener) wakeCh(agent string) <-chan struct{} {
	l.want(l.b.channelFor(evClaimable, agent))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake.ForAgent(agent)
}

// endedCh returns the channel closed when an action posted by one of
// agent's identities next ends, or, when every is true, at the next change
// of any kind (ends among them).
func (l *listener) endedCh(agent string, every bool) <-chan struct{} {
	if every {
		// Every end reaches this Board only on the change channel, which
		// carries every change: such a waiter wakes at each and looks.
		l.want(l.b.channel(evChanged))
		return l.changeCh()
	}
	l.want(l.b.channelFor(evEnded, agent))
	l.mu.Lock()
	defer l.mu.Unlock()
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
