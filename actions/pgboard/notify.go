package pgboard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/actions/internal/wakeup"
	"github.com/tractat-us/bee/internal/logkey"
)

// channel names the NOTIFY channel of ev on this board that concerns
// everyone (an action for anyone; for evChanged, every change).
func (b *Board) channel(k engine.Kind) string {
	switch k {
	case engine.Claimable:
		return "bee_wake_" + b.id
	case engine.Ended:
		return "bee_ended_" + b.id
	}
	return "bee_change_" + b.id
}

// channelFor names the NOTIFY channel of e (see package wakeup):
// one channel per agent, so that PostgreSQL delivers a notification only to
// the Boards with a waiter it concerns, rather than wake every bridge on
// every machine to read a payload and go back to sleep. The agent's name
// is hashed to keep the name within PostgreSQL's 63 bytes; two agents
// whose hashes collide share a channel, and the payload tells them apart.
func (b *Board) channelFor(e engine.Event) string {
	if e.Kind == engine.Changed || e.Key == wakeup.Everyone {
		return b.channel(e.Kind)
	}
	h := fnv.New64a()
	h.Write([]byte(e.Key))
	return b.channel(e.Kind) + "_" + strconv.FormatUint(h.Sum64(), 36)
}

// notify queues e's notifications in tx: PostgreSQL delivers them when tx
// commits, and never when it rolls back. One goes to the channel of e's
// key, whom it concerns (see package wakeup), with the key as its
// payload; none when the key is people's (wakeup.People), on whose
// channels nobody listens: no agent's waiter waits for them, and people
// hear of them through Await and Changes, on the change channel. One goes
// to the change channel, for those who watch every change (bee watch, the
// board page, Await, which hears of every end there), when some Board
// listens there (see watchedSQL). A claim (Changed) concerns only those
// who watch every change: it sends nothing in its transaction, since a
// NOTIFY in a commit serialises commits across the server, and the change
// channel hears of claims after their commits instead, coalesced (see
// Board.tellChanged). So the end of an action a person posted, while
// nobody watches, commits with no NOTIFY at all.
//
// Bees before per-agent channels LISTEN only on the channels of everyone:
// during an upgrade they hear of addressed work and ends at their safety
// poll. Bees before the watch lock LISTEN on the change channel without
// taking it: they hear this bee's changes there (bee watch, Await) only
// when another Board of a newer bee watches too, else at their safety
// poll. Both kinds' own notifications still reach this bee, which listens
// on every channel they send to.
//
// In a board's write transaction (a pipeTx) the statement goes with the
// COMMIT, in its round trip.
func (b *Board) notify(ctx context.Context, tx pgx.Tx, e engine.Event) error {
	var sql string
	var args []any
	switch {
	case e.Kind == engine.Changed:
		return nil
	case e.Key == wakeup.People:
		sql, args = notifyChangeSQL, []any{b.channel(engine.Changed), watchLock, b.id}
	default:
		sql, args = notifyKeySQL, []any{b.channelFor(e), e.Key, b.channel(engine.Changed), watchLock, b.id}
	}
	if p, ok := tx.(*pipeTx); ok {
		p.notify(sql, args...)
		return nil
	}
	_, err := tx.Exec(ctx, sql, args...)
	return err
}

// The watch lock says whether some Board listens on a board's change
// channel, so that a writer NOTIFYs there only then: a NOTIFY makes its
// commit wait for every other NOTIFYing commit on the server, flush
// included, and a claim's notification is a commit of its own. A Board
// that LISTENs on the change channel first holds, on its listening
// connection for as long as it lives, a shared advisory lock on each of
// watchStripes keys: watchLock and the hash of the board's id, xor the
// stripe. A writer tries for an exclusive transaction lock on the key of
// its backend's stripe and NOTIFYs only when it cannot have it (a
// watcher holds it, or, rarely, another writer of that stripe), so
// two writers at once seldom take each other for a watcher.
//
// No change is missed: a claim's notification is tried after its commit,
// so a Board that began to watch after the try looks afterwards and sees
// the claim; a post's or an end's is tried inside its transaction, whose
// lock a Board that begins to watch waits for, so that it looks only once
// that transaction has ended. A Board that loses its connection loses
// its locks with it, and looks again once it has listened again.
const (
	watchLock    = 0x62656504 // "bee" and 4 (see repoLock)
	watchStripes = 8
)

// watched is the SQL condition that some Board watches the change channel
// (see watchLock): its parameters $n and $n+1 are watchLock and the
// board's id. The lock it takes when nobody does is held to the end of
// the transaction.
func watched(n int) string {
	return fmt.Sprintf(`NOT pg_try_advisory_xact_lock($%d, hashtext($%d) # (pg_backend_pid() %% %d))`, n, n+1, watchStripes)
}

// The statements that notify: the change channel ($1) when watched; a
// key's channel ($1, payload $2) and the change channel ($3) when
// watched.
var (
	notifyChangeSQL = `SELECT pg_notify($1, '') WHERE ` + watched(2)
	notifyKeySQL    = `SELECT pg_notify($1, $2), (SELECT pg_notify($3, '') WHERE ` + watched(4) + `)`
)

// watchSQL takes a watcher's shared locks (see watchLock): $1 and $2 are
// watchLock and the board's id.
var watchSQL = fmt.Sprintf(`SELECT count(pg_advisory_lock_shared($1, hashtext($2) # s)) FROM generate_series(0, %d) s`, watchStripes-1)

// changeWindow is the least time between two notifications of claims on
// the change channel from one Board: River coalesces its insert
// notifications per queue the same way (at most one per 100 ms). Those
// who care about a claim are people's views (bee watch, the board page),
// for whom a tenth of a second is not seen; so even the first claim after
// a quiet spell is told at the end of a window, not at once: a claimant
// goes on at once (it finishes, fails or releases, or looks again), and
// a notification sent meanwhile would run beside it, on a connection of
// its own the pool opens for it (issue 22: 32 such connections, a fork
// and an authentication each on the server, in the first round of a
// fan-out). Posts and ends, which waiters wait for, notify in their own
// commits.
const changeWindow = 100 * time.Millisecond

// tellChanged sends a notification on the change channel, when some Board
// watches it (see watchLock), after the commit of the claim it tells and
// outside any transaction: at the end of a changeWindow, one for all the
// changes within it. Sending runs in the Board's lifetime, on one
// goroutine at a time, which ends once a window passes without a change.
// A notification lost to a failure is a hint lost: watchers look at their
// safety poll.
func (b *Board) tellChanged() {
	b.changeMu.Lock()
	defer b.changeMu.Unlock()
	if b.changeBusy {
		b.changePending = true
		return
	}
	b.changeBusy = true
	if !b.life.Go(b.sendChanges) {
		b.changeBusy = false
	}
}

// sendChanges sends the change channel's notification at the end of the
// window the change that started it opened, then one more at the end of
// each window in which another change came.
func (b *Board) sendChanges() {
	for {
		t := time.NewTimer(changeWindow)
		select {
		case <-b.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		b.changeMu.Lock()
		b.changePending = false // this notification tells of it
		b.changeMu.Unlock()
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.Retry)
		_, err := b.pool.Exec(ctx, notifyChangeSQL, b.channel(engine.Changed), watchLock, b.id)
		cancel()
		if err != nil && b.ctx.Err() == nil {
			b.log.Debug("change notification failed; watchers look at their safety poll", logkey.Err, b.scrub(err))
		}
		b.changeMu.Lock()
		more := b.changePending
		b.changeBusy = more
		b.changeMu.Unlock()
		if !more {
			return
		}
	}
}

// hear makes the listener LISTEN on the channel that carries e from other
// processes (see engine.NewHub).
func (l *listener) hear(e engine.Event) { l.want(l.b.channelFor(e)) }

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
// listened to only once this Board has run Changes or waits for every end;
// it then holds the watch lock on that connection (see watchLock), without
// which writers send nothing there.
type listener struct {
	b   *Board
	cfg *pgx.ConnConfig

	hub *engine.Hub // the local waiters

	// relayName is the machine's listener's socket (see relay.go); ""
	// when the Board listens on its own connection.
	relayName string
	// ownUntil: until then, the Board listens on its own connection (its
	// relay stalled). Only run's goroutine uses it.
	ownUntil time.Time

	mu     sync.Mutex               // guards the rest
	wanted map[string]chan struct{} // channels to LISTEN on, each to a channel closed once it first is
	// extra are the channels the followers of this Board, the machine's
	// listener, asked for and it does not want itself (see relay.go).
	extra map[string]bool
	// live are the channels listened to in this session (on this
	// connection, or by this follower's relay); liveChanged is closed,
	// and replaced, when they change.
	live        map[string]bool
	liveChanged chan struct{}
	interrupt   context.CancelFunc
	up          bool // connected and listening
	heard       int  // notifications received, for tests
}

func newListener(b *Board, cfg *pgx.ConnConfig) *listener {
	l := &listener{
		b:      b,
		cfg:    cfg.Copy(),
		hub:    b.hub,
		wanted: make(map[string]chan struct{}),

		live:        map[string]bool{},
		liveChanged: make(chan struct{}),
	}
	for _, k := range []engine.Kind{engine.Claimable, engine.Ended} {
		l.wanted[b.channel(k)] = make(chan struct{})
	}
	if relayOn(&b.opts) {
		l.relayName = machineSocket("pglisten", b.hostKey, b.location, b.id)
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
		var re *relayError
		switch {
		case errors.As(err, &re):
			// The machine's listener ended, stalled or refused this
			// Board: listen anew soon, on its own connection if need be.
			if re.own {
				l.ownUntil = time.Now().Add(relayOwn)
			}
			n = 0
			log.Debug("board listener: listening anew", logkey.Err, err)
		case errors.Is(err, errOwnDone):
			n = 0
			continue // back to the machine's listener
		case wasUp:
			n = 0
			log.Warn("board listener lost its connection; reconnecting", logkey.Err, l.b.scrub(err))
		default:
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

// session listens until its connection fails or ctx ends: as the
// machine's listener, which the first Board of the machine to try
// becomes, through it, or on a connection of its own (see relay.go).
func (l *listener) session(ctx context.Context) error {
	// Before a relay takes followers: it tells them a channel is listened
	// to only once this session listens there.
	l.newSession()
	if l.relayName == "" || l.watches() || time.Now().Before(l.ownUntil) {
		return l.listenOwn(ctx, nil)
	}
	ln, err := listenMachine(l.relayName)
	switch {
	case err == nil:
		return l.serveMachine(ctx, ln)
	case errors.Is(err, errMachineTaken):
		return l.follow(ctx)
	}
	l.b.log.Debug("cannot listen for the machine; listening on its own", logkey.Err, err)
	l.ownUntil = time.Now().Add(relayOwn)
	return l.listenOwn(ctx, nil)
}

// errOwnDone ends a session on the listener's own connection when it is
// time to try the machine's listener again.
var errOwnDone = errors.New("listened on its own long enough")

// listenOwn connects, listens and dispatches notifications (to r's
// followers too, when set) until the connection fails or ctx ends, or
// until ownUntil when it is set.
func (l *listener) listenOwn(ctx context.Context, r *relay) error {
	outer := ctx
	if l.relayName != "" && r == nil && !l.watches() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, l.ownUntil)
		defer cancel()
	}
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
		for name := range l.extra {
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
			if ctx.Err() != nil && outer.Err() == nil && l.b.ctx.Err() == nil {
				return errOwnDone
			}
			return err
		}
		if r != nil {
			r.forward(n.Channel, n.Payload)
		}
		l.heardOne(n.Channel, n.Payload)
	}
}

// heardOne wakes the local waiters a notification on channel concerns,
// when this Board wants channel itself (a relay hears its followers'
// too).
func (l *listener) heardOne(channel, payload string) {
	l.mu.Lock()
	_, own := l.wanted[channel]
	if own {
		l.heard++
	}
	l.mu.Unlock()
	if !own {
		return
	}
	switch {
	case strings.HasPrefix(channel, l.b.channel(engine.Claimable)):
		l.hub.Fire(engine.Event{Kind: engine.Claimable, Key: payload})
	case strings.HasPrefix(channel, l.b.channel(engine.Ended)):
		l.hub.Fire(engine.Event{Kind: engine.Ended, Key: payload})
	default:
		l.hub.Fire(engine.Event{Kind: engine.Changed})
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
	for name := range l.extra {
		if !listening[name] && l.wanted[name] == nil {
			todo = append(todo, name)
		}
	}
	l.mu.Unlock()
	for _, name := range todo {
		if name == l.b.channel(engine.Changed) {
			// Before the LISTEN, so that writers notify from then on.
			if _, err := conn.Exec(ctx, watchSQL, watchLock, l.b.id); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
		listening[name] = true
	}
	l.listened(todo)
	return nil
}

// watches says whether the Board listens on the change channel, which it
// does on a connection of its own, never through the machine's listener:
// the watch lock that makes writers notify there (see watchLock) is then
// held for as long as this Board lives, and no longer.
func (l *listener) watches() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wanted[l.b.channel(engine.Changed)] != nil
}

// newSession forgets what the last session listened to.
func (l *listener) newSession() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = map[string]bool{}
	close(l.liveChanged)
	l.liveChanged = make(chan struct{})
}

// listened says that the channels names are listened to in this session,
// to whoever waits for one. Once every wanted channel is, the first time
// in a session, it marks the listener up and wakes every waiter:
// something may have happened while nobody listened.
func (l *listener) listened(names []string) {
	l.mu.Lock()
	for _, name := range names {
		l.live[name] = true
		if done, ok := l.wanted[name]; ok && !wakeup.Closed(done) {
			close(done)
		}
	}
	close(l.liveChanged)
	l.liveChanged = make(chan struct{})
	first := !l.up
	for name := range l.wanted {
		first = first && l.live[name]
	}
	if first {
		l.up = true
	}
	l.mu.Unlock()
	if first {
		l.hub.FireAll()
	}
}

// liveFor says whether the listener, the machine's listener, listens on
// name in this session, asking for it for a follower when it does not
// want it itself, and returns a channel closed when that may have
// changed.
func (l *listener) liveFor(name string) (live bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wanted[name] == nil && !l.extra[name] {
		if l.extra == nil {
			l.extra = map[string]bool{}
		}
		l.extra[name] = true
		if l.interrupt != nil {
			l.interrupt()
		}
	}
	return l.live[name], l.liveChanged
}

// forgetFollowers forgets the followers' channels once the listener is no
// longer the machine's.
func (l *listener) forgetFollowers() {
	l.mu.Lock()
	l.extra = nil
	l.mu.Unlock()
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
			if l.live[name] { // this Board, the machine's listener, listens there for a follower
				close(done)
			}
			delete(l.extra, name)
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
	if !pending {
		return
	}
	// Even while the listener is not up: a follower asks its relay only
	// when told to (see listener.ask), and it is up only once every
	// channel it wants is listened to.
	if interrupt != nil {
		interrupt()
	}
	if !up {
		return
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
