package pgboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tractat-us/bee/internal/logkey"
)

// The machine's claimer. On a durable server one commit per claim tops
// out near the disk's flush rate, whatever the statement does; one
// transaction claiming for several claimants pays one flush for all of
// them. So the Boards of one machine (one user, one board) elect one of
// them, the first to claim, as the machine's claimer: it listens on a
// socket only that user's processes on that machine reach (an abstract
// unix socket named after the user, the machine and the board; see
// machine_linux.go), and every other Board sends its claims there. The
// claimer runs the claims that queued while its last batch ran as one
// batch (claimBatch: the same statement as a Board's own claim, one per
// claimant, in one implicit transaction) on connections of its own (machineConns batches in flight), and
// answers each claimant with its row.
//
// Exactly once stays exactly once:
//
//   - The claimer's first word on a connection is the backend pids of its
//     connections. A claimant whose request may have been sent (it has
//     written it) and whose answer does not come by its commit's bound
//     (commitBy), or whose connection breaks, settles it as a claim of its
//     own whose answer was lost (claimAttempt.settle): it ends those
//     backends, waits until they are gone, and reads the row its token
//     marks. The claimer never sends a claim on another connection: when
//     one of its connections fails it stops being the claimer (the socket
//     closes, another Board is elected), so ended backends mean no request
//     it holds can commit later.
//   - A claimant that has not had the first word in helloWait (a claimer
//     that is stopped, or swamped) has sent nothing, and claims on its own
//     connection; so does one that finds no claimer it may use.
//   - The claimer answers every request it queued: a batch's rows once its
//     commit has answered; a refused statement fails only its own
//     claimant, and the batch's others, rolled back with it, claim again.
//
// The claimer is off unless Options.MachineClaimer or $BEE_PG_CLAIMER=on
// asks for it (see the README's figures: on a busy two-core machine the
// hops through the claimer cost more than the commits it saves), and off
// Linux, where there is no such socket.

// EnvClaimer names the variable that turns the machine's claimer on
// ("on") for every Board of a process.
const EnvClaimer = "BEE_PG_CLAIMER"

const (
	// maxBatch bounds the claims of one batch.
	maxBatch = 32
	// machineConns is how many batches the claimer has in flight at once,
	// each on a connection of its own: one waits for its commit's flush
	// while the next one's claims queue and go.
	machineConns = 2
	// helloWait bounds the wait for a claimer's first word.
	helloWait = 250 * time.Millisecond
	// machineQuiet is how long a Board claims on its own after its
	// machine's claimer did not answer in time.
	machineQuiet = time.Second
	// minMachineSpan: a claim that must commit sooner than this claims
	// on its own, rather than end a claimer's connection if its batch is
	// a little late.
	minMachineSpan = 250 * time.Millisecond
	// requestWait bounds how long the claimer waits for the request of a
	// connection it accepted.
	requestWait = 10 * time.Second
)

// errMachineLate: the machine's claimer did not answer by the claim's
// bound. Once the claim is settled, it is retried (on the Board's own
// connection, as quietMachine says).
var errMachineLate = errors.New("the machine's claimer has not answered in time")

// errNoMachine: the claim was not sent through the machine's claimer, and
// goes on the Board's own connection.
var errNoMachine = errors.New("no machine claimer")

// A claimRoute takes a claim to the machine's claimer: in this process
// (*machineClaimer) or in another (remoteClaimer).
type claimRoute interface {
	// claim sends req through the claimer, setting a.pids and a.sent as
	// claimAttempt.direct does, and waits for its answer until by. It
	// returns errNoMachine when it sent nothing and the caller should
	// claim on its own.
	claim(ctx context.Context, a *claimAttempt, req claimRequest, by time.Time) (claimRow, error)
}

// A claimReply is the claimer's answer to one request.
type claimReply struct {
	Row *claimRow `json:"row,omitempty"`
	// Code and Err: the server refused a statement of the batch (nothing
	// of it committed): SQLSTATE and message.
	Code string `json:"code,omitempty"`
	Err  string `json:"err,omitempty"`
	// Unsent: the claimer sent nothing (it is stopping, or the batch never
	// left it).
	Unsent bool `json:"unsent,omitempty"`
	// Unsure: the batch was sent and its answer lost.
	Unsure bool `json:"unsure,omitempty"`
}

// hello is a claimer's first word on a connection.
type hello struct {
	PIDs []uint32 `json:"pids"` // the backends its batches go to
}

// result is what the reply means to the claimant of a: its row, or an
// error, with a.sent saying whether the claim may have committed.
func (r claimReply) result(a *claimAttempt) (claimRow, error) {
	switch {
	case r.Row != nil:
		return *r.Row, nil
	case r.Code != "":
		a.sent = false
		return claimRow{}, &pgconn.PgError{Code: r.Code, Message: r.Err}
	case r.Unsent:
		return claimRow{}, errNoMachine
	}
	a.sent = true
	return claimRow{}, fmt.Errorf("the machine's claimer lost its batch's answer: %s: %w", r.Err, io.ErrUnexpectedEOF)
}

// machineRoute is where a claim due by goes: the machine's claimer, or nil
// for the Board's own connection. The first Board of the machine to ask
// becomes the claimer.
func (b *Board) machineRoute(by time.Time) claimRoute {
	if b.machineName == "" || time.Until(by) < minMachineSpan || time.Now().UnixNano() < b.machineQuietUntil.Load() {
		return nil
	}
	if m := b.machine.Load(); m != nil && !m.stopped() {
		return m
	}
	b.machineMu.Lock()
	defer b.machineMu.Unlock()
	if m := b.machine.Load(); m != nil && !m.stopped() {
		return m
	}
	ln, err := listenMachine(b.machineName)
	if errors.Is(err, errMachineTaken) {
		return remoteClaimer{b: b}
	}
	if err != nil {
		b.quietMachine("listen", err)
		return nil
	}
	m, err := b.startMachine(ln, by)
	if err != nil {
		_ = ln.Close()
		b.quietMachine("connect", err)
		return nil
	}
	b.machine.Store(m)
	return m
}

// quietMachine makes the Board claim on its own for machineQuiet.
func (b *Board) quietMachine(what string, err error) {
	b.machineQuietUntil.Store(time.Now().Add(machineQuiet).UnixNano())
	b.log.Debug("claiming without the machine's claimer for now", "step", what, logkey.Err, b.scrub(err))
}

// A machineClaimer is this Board serving as its machine's claimer.
type machineClaimer struct {
	b     *Board
	ln    *net.UnixListener
	conns []*pgx.Conn
	pids  []uint32 // the connections' backends

	wake chan struct{} // a request queued (capacity 1)
	stop chan struct{} // closed by shut
	once sync.Once

	mu     sync.Mutex
	queue  []*pendingClaim
	closed bool                   // no more requests are queued
	served map[*net.UnixConn]bool // the connections being served

	batches, claims atomic.Int64 // served so far, for tests
	maxSeen         atomic.Int64 // the largest batch so far, for tests
}

// A pendingClaim is a queued request and where its answer goes.
type pendingClaim struct {
	req   claimRequest
	reply chan claimReply // capacity 1: the batch loop never blocks on it
}

// startMachine makes this Board the machine's claimer on ln: its own
// connections (made by by), its batch loops and its accept loop, which
// end at Close or when a connection fails.
func (b *Board) startMachine(ln *net.UnixListener, by time.Time) (*machineClaimer, error) {
	ctx, cancel := context.WithDeadline(b.ctx, by)
	defer cancel()
	m := &machineClaimer{b: b, ln: ln, wake: make(chan struct{}, 1), stop: make(chan struct{}), served: make(map[*net.UnixConn]bool)}
	for range machineConns {
		conn, err := pgx.ConnectConfig(ctx, b.connConfig.Copy())
		if err != nil {
			m.closeConns()
			return nil, err
		}
		m.conns = append(m.conns, conn)
		m.pids = append(m.pids, conn.PgConn().PID())
	}
	started := 0
	for _, conn := range m.conns {
		if !b.life.Go(func() { m.batchLoop(conn) }) {
			break
		}
		started++
	}
	if started < len(m.conns) {
		m.shut()
		for _, conn := range m.conns[started:] {
			closeConn(conn)
		}
		if started == 0 {
			return nil, b.closed()
		}
	}
	if !b.life.Go(m.acceptLoop) {
		m.shut()
	}
	b.log.Debug("serving as the machine's claimer", "backends", m.pids)
	return m, nil
}

func (m *machineClaimer) closeConns() {
	for _, c := range m.conns {
		closeConn(c)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

func (m *machineClaimer) stopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// shut stops the claimer: the socket closes (another Board may be
// elected), the connections being served close, and the batch loop
// answers what is queued Unsent, closes its connection and ends.
func (m *machineClaimer) shut() {
	m.once.Do(func() {
		close(m.stop)
		_ = m.ln.Close()
		m.mu.Lock()
		m.closed = true
		for c := range m.served {
			_ = c.Close()
		}
		m.mu.Unlock()
	})
}

// submit queues p, unless the claimer has stopped.
func (m *machineClaimer) submit(p *pendingClaim) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.queue = append(m.queue, p)
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return true
}

// take takes up to maxBatch queued requests.
func (m *machineClaimer) take() []*pendingClaim {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := min(len(m.queue), maxBatch)
	got := m.queue[:n:n]
	m.queue = m.queue[n:]
	if len(m.queue) > 0 {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	return got
}

// batchLoop runs queued requests in batches on conn until the claimer
// stops (at the Board's Close, or when one of its connections fails).
func (m *machineClaimer) batchLoop(conn *pgx.Conn) {
	defer func() {
		m.shut()
		for _, p := range m.takeAll() {
			p.reply <- claimReply{Unsent: true}
		}
		closeConn(conn)
	}()
	for {
		select {
		case <-m.b.ctx.Done():
			return
		case <-m.stop:
			return
		case <-m.wake:
		}
		if batch := m.take(); len(batch) > 0 && !m.run(conn, batch) {
			return
		}
	}
}

// takeAll takes what is queued once the claimer no longer queues.
func (m *machineClaimer) takeAll() []*pendingClaim {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	got := m.queue
	m.queue = nil
	return got
}

// run sends one batch and answers its claimants; false when the
// connection failed and the claimer must stop.
func (m *machineClaimer) run(conn *pgx.Conn, batch []*pendingClaim) bool {
	reqs := make([]claimRequest, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	if h := m.b.opts.beforeBatch; h != nil {
		h(len(batch))
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitBound)
	rows, err := claimBatch(ctx, conn, reqs)
	cancel()
	if err == nil {
		if h := m.b.opts.afterBatch; h != nil {
			h(len(batch))
		}
		m.batches.Add(1)
		m.claims.Add(int64(len(batch)))
		for m.maxSeen.Load() < int64(len(batch)) {
			m.maxSeen.Store(int64(len(batch)))
		}
		for i, p := range batch {
			p.reply <- claimReply{Row: &rows[i]}
		}
		return true
	}
	var be *batchError
	at := -1
	if errors.As(err, &be) {
		at, err = be.at, be.err
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		// The implicit transaction rolled back: nothing committed.
		for i, p := range batch {
			if i == at {
				p.reply <- claimReply{Code: pe.Code, Err: pe.Message}
			} else {
				p.reply <- claimReply{Code: "40001", Err: "another claim of the machine's batch failed; claim again"}
			}
		}
		return true
	case pgconn.SafeToRetry(err) && !conn.IsClosed():
		for _, p := range batch {
			p.reply <- claimReply{Unsent: true}
		}
		return true
	}
	m.b.log.Warn("the machine's claimer lost its connection; another Board will be elected",
		"backend", conn.PgConn().PID(), logkey.Err, m.b.scrub(err))
	for _, p := range batch {
		p.reply <- claimReply{Unsure: true, Err: m.b.scrub(err).Error()}
	}
	return false
}

// claim implements claimRoute for the claimer's own Board.
func (m *machineClaimer) claim(_ context.Context, a *claimAttempt, req claimRequest, by time.Time) (claimRow, error) {
	if m.pids[0] == m.b.machineGone.Load() {
		m.shut()
		return claimRow{}, errNoMachine
	}
	p := &pendingClaim{req: req, reply: make(chan claimReply, 1)}
	if !m.submit(p) {
		return claimRow{}, errNoMachine
	}
	a.pids, a.sent = m.pids, true
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case r := <-p.reply:
		return r.result(a)
	case <-t.C:
		return claimRow{}, errMachineLate
	}
}

// acceptLoop serves the claimer's socket until the claimer stops.
func (m *machineClaimer) acceptLoop() {
	defer m.shut()
	for {
		c, err := m.ln.AcceptUnix()
		if err != nil {
			return
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = c.Close()
			return
		}
		m.served[c] = true
		m.mu.Unlock()
		if !m.b.life.Go(func() { m.serve(c) }) {
			_ = c.Close()
			return
		}
	}
}

// serve answers one connection's request: the claimer's first word, the
// request, its reply.
func (m *machineClaimer) serve(c *net.UnixConn) {
	defer func() {
		m.mu.Lock()
		delete(m.served, c)
		m.mu.Unlock()
		_ = c.Close()
	}()
	if !peerIsUs(c) {
		return
	}
	enc, dec := json.NewEncoder(c), json.NewDecoder(c)
	_ = c.SetDeadline(time.Now().Add(requestWait))
	if err := enc.Encode(hello{PIDs: m.pids}); err != nil {
		return
	}
	var req claimRequest
	if err := dec.Decode(&req); err != nil {
		return
	}
	p := &pendingClaim{req: req, reply: make(chan claimReply, 1)}
	if !m.submit(p) {
		return // the claimant sees the connection close, and settles
	}
	r := <-p.reply
	_ = c.SetDeadline(time.Now().Add(requestWait))
	_ = enc.Encode(r)
}

// A remoteClaimer is the machine's claimer in another process.
type remoteClaimer struct{ b *Board }

func (r remoteClaimer) claim(_ context.Context, a *claimAttempt, req claimRequest, by time.Time) (claimRow, error) {
	b := r.b
	c, err := dialMachine(b.machineName)
	if err != nil {
		return claimRow{}, errNoMachine
	}
	defer c.Close()
	if !peerIsUs(c) {
		b.quietMachine("check", errors.New("the machine's claimer socket is another user's"))
		return claimRow{}, errNoMachine
	}
	enc, dec := json.NewEncoder(c), json.NewDecoder(c)
	_ = c.SetDeadline(time.Now().Add(helloWait))
	var h hello
	if err := dec.Decode(&h); err != nil {
		b.quietMachine("hello", err)
		return claimRow{}, errNoMachine
	}
	if len(h.PIDs) == 0 || h.PIDs[0] == b.machineGone.Load() {
		b.quietMachine("hello", errors.New("the machine's claimer lost its backend"))
		return claimRow{}, errNoMachine
	}
	a.pids, a.sent = h.PIDs, true
	_ = c.SetDeadline(by)
	if err := enc.Encode(req); err != nil {
		return claimRow{}, fmt.Errorf("send the claim to the machine's claimer: %w", err)
	}
	var reply claimReply
	if err := dec.Decode(&reply); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return claimRow{}, errMachineLate
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return claimRow{}, fmt.Errorf("the machine's claimer did not answer: %w", err)
	}
	if reply.Unsent {
		a.sent = false
	}
	return reply.result(a)
}
