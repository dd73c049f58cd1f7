package pgboard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions/internal/engine"
	"github.com/tractat-us/bee/internal/logkey"
)

// The machine's listener. PostgreSQL signals every backend that LISTENs
// on a database at every NOTIFY to it, whatever the channel (PostgreSQL
// 15's SignalBackends): with a bridge per session, each holding a
// listening connection, every post woke every session's backend, and the
// one it concerned waited its turn among them for a CPU (measured: 31
// idle listeners add 0.65 ms to the p50 of a notification's delivery on
// an idle machine, 100 add 2 ms; on a loaded one they are the fan-out's
// tail). So the Boards of one machine (one user, one board) elect one of
// them, as the machine's claimer does (see machine.go): the first to bind
// an abstract unix socket (machine_linux.go) LISTENs, on its own
// connection, on every channel the others ask for too, and hands each
// notification to those that asked. The server then signals one backend
// per machine.
//
// A notification is a hint (a waiter looks at the database when woken,
// and at its safety poll), but a lost one costs a waiter its wake-up, so
// a follower (a Board that listens through the machine's listener) is
// told that its channels are listened to before it counts as listening
// (see listener.want), and wakes every waiter whenever it starts to
// listen anew: after a relay ends (it closes its socket when its own
// connection fails or its Board closes, and the followers elect another)
// and after it stalls (a relay says something every relayPing; a follower
// that hears nothing for relayStall listens on its own connection for
// relayOwn, then tries the machine's again: a bridge stopped with its
// Claude Code by ^Z delays its followers' wake-ups by relayStall at most).
// A follower that reads too slowly is let go by the relay rather than
// held up, and listens anew.
//
// The protocol is lines: a follower sends "L <channel>" to ask; the relay
// answers "K <channel>" once it LISTENs there, "N <channel> <payload>"
// for each notification (the payload quoted), and "P" when it has said
// nothing for relayPing.
//
// A Board that watches every change (bee watch, the board page, Await)
// listens on a connection of its own from then on: the watch lock that
// makes every writer notify the change channel (see watchLock) must end
// with the watcher, not with the relay. The relay LISTENs for as long as
// it serves on every channel a follower asked for, gone or not: a
// channel costs a notification's delivery, not a wake of the server's
// other backends.
//
// It is on by default, on Linux; Options.OwnListener or
// $BEE_PG_LISTENER=own turns it off for a Board.

// EnvListener names the variable that, set to "own", makes every Board of
// a process LISTEN on a connection of its own.
const EnvListener = "BEE_PG_LISTENER"

const (
	// relayPing is how often a relay says something to each follower.
	relayPing = 2 * time.Second
	// relayStall is how long a follower waits to hear from its relay
	// before it listens on its own connection.
	relayStall = 6 * time.Second
	// relayOwn is how long a follower whose relay stalled, or refused it,
	// listens on its own connection before it tries the machine's again.
	relayOwn = 30 * time.Second
	// relayQueue bounds the lines queued for one follower: one that falls
	// this far behind is let go.
	relayQueue = 256
)

// A relayError ends a follower's session: it listens anew (see
// listener.run), on its own connection when own is set.
type relayError struct {
	own bool
	err error
}

func (e *relayError) Error() string { return "the machine's listener: " + e.err.Error() }
func (e *relayError) Unwrap() error { return e.err }

// A relay is the machine's listener's side of its followers: it runs while
// its Board's listener holds the socket and its own connection listens.
type relay struct {
	l  *listener
	ln *net.UnixListener
	wg sync.WaitGroup // the accept loop and each follower's goroutines

	mu        sync.Mutex
	followers map[*follower]bool
	closed    bool
}

// A follower is one follower's connection to the relay.
type follower struct {
	c    *net.UnixConn
	out  chan string     // lines to send
	subs map[string]bool // channels it asked for; guarded by relay.mu
	once sync.Once
	gone chan struct{} // closed when it is let go
}

func (f *follower) drop() {
	f.once.Do(func() {
		close(f.gone)
		_ = f.c.Close()
	})
}

// serveMachine is a session as the machine's listener: ln is its socket.
// It listens on its own connection until that fails or ctx ends, and
// lets its followers go then, closing the socket, so that they elect
// another.
func (l *listener) serveMachine(ctx context.Context, ln *net.UnixListener) error {
	r := &relay{l: l, ln: ln, followers: map[*follower]bool{}}
	r.wg.Add(1)
	go r.accept()
	defer r.close()
	l.b.log.Debug("this process listens for its machine's Boards", logkey.Path, l.relayName)
	return l.listenOwn(ctx, r)
}

// accept takes followers until the socket closes.
func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.AcceptUnix()
		if err != nil {
			return
		}
		if !peerIsUs(c) {
			_ = c.Close()
			continue
		}
		f := &follower{c: c, out: make(chan string, relayQueue), subs: map[string]bool{}, gone: make(chan struct{})}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			return
		}
		r.followers[f] = true
		r.wg.Add(2)
		r.mu.Unlock()
		go r.read(f)
		go r.write(f)
	}
}

// read takes f's requests: for each channel, it LISTENs there (through
// the listener's own connection) and says so once it does.
func (r *relay) read(f *follower) {
	defer r.wg.Done()
	defer r.forget(f)
	sc := bufio.NewScanner(f.c)
	for sc.Scan() {
		ch, ok := strings.CutPrefix(sc.Text(), "L ")
		if !ok || ch == "" {
			return // not a follower of this bee
		}
		r.mu.Lock()
		f.subs[ch] = true // notifications go to f from the LISTEN on
		r.mu.Unlock()
		for {
			live, changed := r.l.liveFor(ch)
			if live {
				r.send(f, "K "+ch)
				break
			}
			select {
			case <-changed:
			case <-f.gone:
				return
			}
		}
	}
}

// write sends f's lines, and a ping when there were none for relayPing.
func (r *relay) write(f *follower) {
	defer r.wg.Done()
	defer f.drop()
	t := time.NewTimer(relayPing)
	defer t.Stop()
	w := bufio.NewWriter(f.c)
	for {
		var line string
		select {
		case <-f.gone:
			return
		case line = <-f.out:
		case <-t.C:
			line = "P"
		}
		w.WriteString(line)
		w.WriteByte('\n')
		for more := true; more; { // what else is queued goes in the same write
			select {
			case line = <-f.out:
				w.WriteString(line)
				w.WriteByte('\n')
			default:
				more = false
			}
		}
		_ = f.c.SetWriteDeadline(time.Now().Add(relayStall))
		if w.Flush() != nil {
			return
		}
		t.Reset(relayPing)
	}
}

// send queues line for f, and lets f go when it is too far behind.
func (r *relay) send(f *follower, line string) {
	select {
	case f.out <- line:
	default:
		f.drop()
	}
}

// forward hands a notification to the followers that asked for its
// channel.
func (r *relay) forward(channel, payload string) {
	line := "N " + channel + " " + strconv.Quote(payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	for f := range r.followers {
		if f.subs[channel] {
			r.send(f, line)
		}
	}
}

func (r *relay) forget(f *follower) {
	f.drop()
	r.mu.Lock()
	delete(r.followers, f)
	r.mu.Unlock()
}

// close lets every follower go, closes the socket and waits for the
// relay's goroutines.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	for f := range r.followers {
		f.drop()
	}
	r.mu.Unlock()
	_ = r.ln.Close()
	r.wg.Wait()
	r.l.forgetFollowers()
}

// follow is a session as a follower of the machine's listener, until the
// relay ends or stalls or ctx ends. Its error is a *relayError (or ctx's).
func (l *listener) follow(ctx context.Context) error {
	c, err := dialMachine(l.relayName)
	if err != nil {
		return &relayError{err: err}
	}
	if !peerIsUs(c) {
		_ = c.Close()
		return &relayError{own: true, err: fmt.Errorf("socket %s is held by another user", l.relayName)}
	}
	fctx, cancel := context.WithCancel(ctx)
	poke := make(chan struct{}, 1)
	l.mu.Lock()
	l.interrupt = func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	wrote := make(chan error, 1)
	go func() { wrote <- l.ask(fctx, c, poke) }()
	defer func() {
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		cancel()
		_ = c.Close()
		<-wrote
	}()
	// Closing, not a deadline, ends the read when ctx ends: the loop sets
	// a deadline of its own before each line.
	stop := context.AfterFunc(fctx, func() { _ = c.Close() })
	defer stop()
	err = l.hearRelay(c)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// hearRelay reads the relay's lines on c until it ends, stalls or says
// something this bee does not understand: a *relayError.
func (l *listener) hearRelay(c *net.UnixConn) error {
	sc := bufio.NewScanner(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(relayStall))
		if !sc.Scan() {
			break
		}
		line := sc.Text()
		switch {
		case line == "P":
		case strings.HasPrefix(line, "K "):
			l.listened([]string{line[2:]})
		case strings.HasPrefix(line, "N "):
			ch, quoted, _ := strings.Cut(line[2:], " ")
			payload, err := strconv.Unquote(quoted)
			if err != nil {
				return &relayError{err: fmt.Errorf("bad line %q", line)}
			}
			l.heardOne(ch, payload)
		default:
			return &relayError{err: fmt.Errorf("bad line %q", line)}
		}
	}
	err := sc.Err()
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return &relayError{own: true, err: fmt.Errorf("silent for %v", relayStall)}
	}
	if err == nil {
		err = errors.New("it let this Board go")
	}
	return &relayError{err: err}
}

// ask sends the relay an "L" line for each channel the listener wants and
// has not asked for on c, at once and whenever poked, until ctx ends. A
// Board that comes to watch every change stops following (see
// listener.watches): ask closes c then.
func (l *listener) ask(ctx context.Context, c *net.UnixConn, poke <-chan struct{}) error {
	asked := map[string]bool{}
	change := l.b.channel(engine.Changed)
	for {
		l.mu.Lock()
		var b strings.Builder
		watches := false
		for name := range l.wanted {
			watches = watches || name == change
			if !asked[name] {
				asked[name] = true
				b.WriteString("L " + name + "\n")
			}
		}
		l.mu.Unlock()
		if watches {
			_ = c.Close() // the read ends too; the next session is the Board's own
			return nil
		}
		if b.Len() > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(relayStall))
			if _, err := c.Write([]byte(b.String())); err != nil {
				_ = c.Close() // the read ends too
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		}
	}
}

// relayOn says whether a Board listens through its machine's listener.
func relayOn(o *Options) bool {
	return !o.OwnListener && os.Getenv(EnvListener) != "own"
}
