package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/textcut"
)

// Wake on work, the bridge's side: bee-hook's waiter long-polls the bridge
// (clearctl's POST /wait-for-work), and the Session decides when to wake the
// idle session and with what line. It promises that:
//   - one waiter is armed per session: a newer registration answers the
//     older one ReasonSuperseded;
//   - a registration looks at the board first (work posted between the last
//     empty wait and the Stop is not missed), then waits on the board's
//     wake-up;
//   - it wakes once per action per identity: an action the model chose not
//     to take does not wake it again;
//   - it is silent while a bee_wait_action begun since it registered is in
//     flight (that call gets the action); a wait begun before it does not
//     silence it, since the turn that made that wait has ended (the wait
//     may be abandoned, see held.go);
//   - an action it wakes for is claimed first (Source.Notice), so of several
//     idle sessions only one wakes; the claim is handed to the session's next
//     bee_wait_action, which returns it at once, and goes back to the board if
//     no wait takes it within Config.HandoverWithin;
//   - /clear ends the old identity's watch, and the waiter carries on under
//     the new identity, which is not woken for what the old one held and
//     gave back (another live identity of the agent takes it) unless it is
//     its agent's only live identity;
//   - a claim a wait handed over that the model has not acted on when its
//     turn ends is a reminder (held.go);
//   - news found for a waiter that has gone meanwhile is kept for the next
//     one (or, for work, the next bee_wait_action), not dropped.

const (
	// DefaultHandoverWithin is how long a claim made for a wake waits for
	// the session's next bee_wait_action before it goes back to the board.
	// Claude Code starts the woken turn within a second or two; two minutes
	// also covers a model that looks around before it calls the tool.
	DefaultHandoverWithin = 2 * time.Minute

	// MaxWakeLine bounds the line a wake shows the model, in bytes.
	MaxWakeLine = 300

	// noticeChunk bounds one Source.Notice call; the waiter then looks
	// again. Any bound works; a long one keeps an idle bridge quiet.
	noticeChunk = 10 * time.Minute
	// noticeRetry is the pause after a Notice that failed, so that a board
	// in trouble is not hammered.
	noticeRetry = time.Second
	// maxWoken bounds how many action ids an identity remembers having
	// been woken for; the oldest are forgotten first.
	maxWoken = 4096
	// publishBound bounds one SetWaiter write.
	publishBound = 2 * time.Second
)

// RearmLine is the wake a waiter gets when the re-arm time its hook asked
// for (WaitRequest.Rearm) comes without news: Claude Code
// would kill the hook at its timeout without a word, and nothing would
// re-arm the waiter until a turn ends. One turn a day is the price.
const RearmLine = "bee: no news for this session in a day; this turn only re-arms bee's waiter before Claude Code's hook timeout ends it. There is no work: end your turn now without calling any tool."

var (
	errWaiterSuperseded = errors.New("superseded by a newer waiter")
	errRearm            = errors.New("re-arm time reached")
)

// A waiter is one registered long-poll.
type waiter struct {
	pid    int // the waiter's process, for the log
	cancel context.CancelCauseFunc
	// stopNotice ends the Notice this waiter is in, if any (a wait began,
	// or news was kept for it); guarded by wakeState.mu.
	stopNotice context.CancelFunc
}

// A handover is a claim Notice made for a wake, waiting for the session's
// next bee_wait_action.
type handover struct {
	rec       actions.Record
	holder    identity.ID
	reminder  bool // handed over again: a wait handed it over, and nobody acted on it
	announced bool // a waiter has been told
	timer     *time.Timer
}

type armState struct {
	who   identity.ID
	armed bool
}

// wakeState is a Session's wake-on-work state.
type wakeState struct {
	mu  sync.Mutex  // guards the fields below
	me  identity.ID // the session's identity, as the waiter and the reminders see it
	cur *waiter     // the armed waiter; nil when none
	// turns counts the waiters registered so far: each registration says
	// a turn of the session has ended (Stop) or the session has started.
	turns int
	// current counts the waits in flight that began since the latest
	// registration: they silence the waiter. quiet is closed and replaced
	// when it drops to zero.
	current int
	quiet   chan struct{}
	// wokenFor is the identity woken holds the action ids of.
	wokenFor identity.ID
	woken    []string
	wokenSet map[string]bool
	handed   []*handover      // oldest first
	untold   []actions.Notice // outcomes found for a waiter that had gone
	closed   bool             // Session.Close was called

	// Claims waits handed over that the model has not acted on, by action
	// id, and the actions remindedFor has been reminded of (held.go).
	held          map[string]*heldClaim
	remindedFor   identity.ID
	reminded      map[string]bool
	remindedOrder []string

	// The armed state for people (Source.SetWaiter) is written by one
	// goroutine, started with the first waiter, ended by Close: want is
	// the latest state, kick says it changed, and gen counts the times it
	// must be written again though it has not changed (a retire joins the
	// new identity after the waiter may have marked it armed, which found
	// no member row yet).
	want    armState
	gen     int
	kick    chan struct{}
	pubDone chan struct{}
}

func (w *wakeState) init(me identity.ID) {
	w.me = me
	w.quiet = make(chan struct{})
	w.kick = make(chan struct{}, 1)
	w.wokenSet = map[string]bool{}
	w.held = map[string]*heldClaim{}
	w.reminded = map[string]bool{}
}

// WaitForWork holds a waiter's long-poll until there is news for the
// session: it answers a wake with the line to show the model, or no wake
// with the reason (ReasonSuperseded when a newer waiter arrived,
// ReasonShuttingDown once the session has departed or ctx ended with cause
// ErrShuttingDown, ReasonGone when ctx ended otherwise). When req.Rearm
// passes with no news it answers the RearmLine wake. A registration is the
// bridge's sign that a turn of the session has ended (see held.go).
func (s *Session) WaitForWork(ctx context.Context, req WaitRequest) WakeAnswer {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if req.Rearm > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, req.Rearm, errRearm)
		defer stop()
	}
	log := s.log.With(logkey.WaiterPID, req.PID, logkey.HookEvent, req.HookEventName)
	w := &waiter{pid: req.PID, cancel: cancel}
	old, ok := s.register(w)
	if !ok {
		return WakeAnswer{Reason: ReasonShuttingDown}
	}
	armed := []any{logkey.Identity, s.Identity()}
	if old != nil {
		old.cancel(errWaiterSuperseded)
		armed = append(armed, logkey.Superseded, old.pid)
	}
	log.Info("waiter armed", armed...)

	resp := s.serveWaiter(ctx, w, log)

	s.wk.mu.Lock()
	last := s.wk.cur == w
	if last {
		s.wk.cur = nil
	}
	s.wk.mu.Unlock()
	if last {
		s.publishArmed(s.Identity(), false)
	}
	return resp
}

// register makes w the armed waiter and returns the one it replaces; ok is
// false once the session is closed. A turn has ended: waits in flight stop
// silencing the waiter, and claims not followed up start their reminder
// bound.
func (s *Session) register(w *waiter) (old *waiter, ok bool) {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	if s.wk.closed {
		return nil, false
	}
	old, s.wk.cur = s.wk.cur, w
	s.wk.turns++
	if s.wk.current > 0 {
		s.wk.current = 0
		close(s.wk.quiet)
		s.wk.quiet = make(chan struct{})
	}
	s.turnEnded()
	return old, true
}

// serveWaiter is WaitForWork's loop: each pass looks under the current
// identity, and starts again when the identity changes, a wait begins or
// ends, or a Notice times out.
func (s *Session) serveWaiter(ctx context.Context, w *waiter, log *slog.Logger) WakeAnswer {
	for {
		if ctx.Err() != nil {
			return s.waiterEnded(ctx, log)
		}
		who, idCtx, err := s.current()
		if err != nil {
			return WakeAnswer{Reason: ReasonShuttingDown}
		}
		s.publishArmed(who, true)
		if ans, ok := s.look(ctx, idCtx, w, who, log); ok {
			return ans
		}
	}
}

// look is one pass of a waiter as who (whose retire ends idCtx): it waits
// out a wait of the running turn, tells news kept for it, or asks the
// board for news. ok is true when it has the waiter's answer.
func (s *Session) look(ctx, idCtx context.Context, w *waiter, who identity.ID, log *slog.Logger) (ans WakeAnswer, ok bool) {
	s.wk.mu.Lock()
	if s.wk.current > 0 {
		// A bee_wait_action of a running turn is in flight: it gets the
		// action.
		quiet := s.wk.quiet
		s.wk.mu.Unlock()
		select {
		case <-quiet:
		case <-ctx.Done():
		case <-idCtx.Done():
		}
		return WakeAnswer{}, false
	}
	if n, reminder, ok := s.wk.takeUndelivered(who); ok {
		s.wk.mu.Unlock()
		return s.wake(log, who, n, reminder), true
	}
	nctx, stopNotice := context.WithCancel(ctx)
	w.stopNotice = stopNotice
	skip := s.wk.skipFor(who)
	s.wk.mu.Unlock()

	stopOnRetire := context.AfterFunc(idCtx, stopNotice)
	n, found, err := s.source.Notice(nctx, who, skip, noticeChunk)
	stopOnRetire()
	// Stopped: a wait began, the identity was retired, news was kept for
	// this waiter, or the waiter went. Look again.
	stopped := nctx.Err() != nil
	stopNotice()

	s.wk.mu.Lock()
	w.stopNotice = nil
	if err == nil && found {
		return s.noticed(ctx, idCtx, w, who, n, log)
	}
	s.wk.mu.Unlock()
	if err != nil && !stopped {
		s.noticeFailed(ctx, who, err, log)
	}
	return WakeAnswer{}, false
}

// noticed wakes the session for news Notice found, or keeps it for later
// when nobody is there to tell: the waiter went, the identity was retired,
// or a wait of the running turn began (for work, it takes it). mu is
// held, and released.
func (s *Session) noticed(ctx, idCtx context.Context, w *waiter, who identity.ID, n actions.Notice, log *slog.Logger) (WakeAnswer, bool) {
	h := s.wk.keep(who, n, s.handoverWithin, s.expireHandover)
	if ctx.Err() != nil || idCtx.Err() != nil || s.wk.current > 0 {
		if cur := s.wk.cur; cur != nil && cur != w && cur.stopNotice != nil {
			cur.stopNotice() // a newer waiter is armed: let it look
		}
		s.wk.mu.Unlock()
		log.Debug("news kept for later", logkey.ActionID, n.Record.ID, logkey.Kind, n.Kind)
		return WakeAnswer{}, false
	}
	s.wk.announce(who, n, h)
	s.wk.mu.Unlock()
	return s.wake(log, who, n, false), true
}

// noticeFailed carries on after a Notice that failed: under a new identity
// when the source says who has departed, else after a pause, so that a
// board in trouble is not hammered.
func (s *Session) noticeFailed(ctx context.Context, who identity.ID, err error, log *slog.Logger) {
	if errors.Is(err, actions.ErrDeparted) {
		_, rerr := s.replaceDeparted(ctx, who)
		if rerr == nil || errors.Is(rerr, errBridgeDeparted) {
			return
		}
		log.Warn("cannot carry on under a new identity", logkey.Err, rerr)
	} else {
		log.Warn("looking for news failed; trying again", logkey.Identity, who, logkey.Err, err)
	}
	t := time.NewTimer(noticeRetry)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waiterEnded answers a waiter whose context has ended, and says in the log
// why: a waiter that goes without a wake leaves the session deaf until its
// next turn ends.
func (s *Session) waiterEnded(ctx context.Context, log *slog.Logger) WakeAnswer {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errWaiterSuperseded):
		// The newer waiter's line says so.
		return WakeAnswer{Reason: ReasonSuperseded}
	case errors.Is(cause, errRearm):
		log.Info("waiter wakes the session to re-arm before its hook times out")
		return WakeAnswer{Wake: true, Line: RearmLine}
	case errors.Is(cause, ErrShuttingDown):
		return WakeAnswer{Reason: ReasonShuttingDown}
	default:
		log.Warn("waiter gone without a wake (its hook ended or was killed); this session hears of new work only when it asks, until its next turn ends",
			logkey.Identity, s.Identity())
		return WakeAnswer{Reason: ReasonGone}
	}
}

// wake logs a wake and makes its answer: for news, or to remind the
// session of a claim it has not acted on.
func (s *Session) wake(log *slog.Logger, who identity.ID, n actions.Notice, reminder bool) WakeAnswer {
	if reminder {
		log.Info("waking the session", logkey.Identity, who, logkey.ActionID, n.Record.ID, logkey.Kind, kindReminder)
		return WakeAnswer{Wake: true, Line: ReminderLine(n.Record)}
	}
	log.Info("waking the session", logkey.Identity, who, logkey.ActionID, n.Record.ID, logkey.Kind, n.Kind)
	return WakeAnswer{Wake: true, Line: WakeLine(who, n)}
}

// kindReminder is the kind a reminder's wake is logged with.
const kindReminder = "reminder"

// keep records news a Notice returned: a claim becomes a handover (with
// its release timer running from now), an outcome is kept untold until it
// is announced. It returns the handover, nil for an outcome. mu is held.
func (w *wakeState) keep(who identity.ID, n actions.Notice, within time.Duration, expire func(*handover)) *handover {
	if n.Kind != actions.NoticeWork {
		w.untold = append(w.untold, n)
		return nil
	}
	return w.handOver(n.Record, who, false, within, expire)
}

// handOver keeps the claim of rec by who for the session's next
// bee_wait_action, and gives it to expire after within. mu is held.
func (w *wakeState) handOver(rec actions.Record, who identity.ID, reminder bool, within time.Duration, expire func(*handover)) *handover {
	h := &handover{rec: rec, holder: who, reminder: reminder}
	h.timer = time.AfterFunc(within, func() { expire(h) })
	w.handed = append(w.handed, h)
	return h
}

// announce marks news as told to who. mu is held.
func (w *wakeState) announce(who identity.ID, n actions.Notice, h *handover) {
	if h != nil {
		h.announced = true
	} else {
		w.untold = removeNotice(w.untold, n.Record.ID)
	}
	w.markWoken(who, n.Record.ID)
}

// takeUndelivered returns news kept for later that who may hear now: an
// untold outcome first, then a claim for who not yet announced (reminder
// says it is one a wait handed over before), and marks it told. mu is
// held.
func (w *wakeState) takeUndelivered(who identity.ID) (n actions.Notice, reminder, ok bool) {
	if len(w.untold) > 0 {
		n := w.untold[0]
		w.untold = w.untold[1:]
		w.markWoken(who, n.Record.ID)
		return n, false, true
	}
	for _, h := range w.handed {
		if !h.announced && h.holder == who {
			h.announced = true
			w.markWoken(who, h.rec.ID)
			return actions.Notice{Kind: actions.NoticeWork, Record: h.rec}, h.reminder, true
		}
	}
	return actions.Notice{}, false, false
}

func removeNotice(ns []actions.Notice, id string) []actions.Notice {
	for i, n := range ns {
		if n.Record.ID == id {
			return append(ns[:i:i], ns[i+1:]...)
		}
	}
	return ns
}

// markWoken remembers that who was woken for id; an identity no longer
// the session's is not woken again, and is not remembered. mu is held.
func (w *wakeState) markWoken(who identity.ID, id string) {
	if who != w.me {
		return
	}
	if w.wokenFor != who {
		w.wokenFor, w.woken, w.wokenSet = who, nil, map[string]bool{}
	}
	if w.wokenSet[id] {
		return
	}
	w.woken = append(w.woken, id)
	w.wokenSet[id] = true
	if len(w.woken) > maxWoken {
		delete(w.wokenSet, w.woken[0])
		w.woken = w.woken[1:]
	}
}

// skipFor returns the action ids who has been woken for. mu is held.
func (w *wakeState) skipFor(who identity.ID) []string {
	if w.wokenFor != who {
		return nil
	}
	return append([]string(nil), w.woken...)
}

// A waitCall is one bee_wait_action or bee_await_action in flight.
type waitCall struct {
	s    *Session
	turn int // wakeState.turns when it began
	once sync.Once
}

// beginWait marks a wait in flight, which silences the waiter (its Notice
// stops at once) until end is called or a newer waiter registers.
func (s *Session) beginWait() *waitCall {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	s.wk.current++
	if cur := s.wk.cur; cur != nil && cur.stopNotice != nil {
		cur.stopNotice()
	}
	return &waitCall{s: s, turn: s.wk.turns}
}

// end marks the wait ended. It may be called more than once.
func (c *waitCall) end() {
	c.once.Do(func() {
		w := &c.s.wk
		w.mu.Lock()
		defer w.mu.Unlock()
		if c.turn != w.turns {
			return // a registration since stopped counting it
		}
		w.current--
		if w.current == 0 {
			close(w.quiet)
			w.quiet = make(chan struct{})
		}
	})
}

// takeHandover returns the oldest claim a wake made for who that is still
// who's, for bee_wait_action to hand over before it asks the board.
func (s *Session) takeHandover(ctx context.Context, who identity.ID) (actions.Record, bool) {
	for {
		s.wk.mu.Lock()
		var h *handover
		for i, c := range s.wk.handed {
			if c.holder == who {
				h = c
				s.wk.handed = append(s.wk.handed[:i:i], s.wk.handed[i+1:]...)
				break
			}
		}
		if h != nil {
			h.timer.Stop()
			s.wk.markWoken(who, h.rec.ID)
		}
		s.wk.mu.Unlock()
		if h == nil {
			return actions.Record{}, false
		}
		// Its poster may have cancelled it meanwhile, or a lease run out.
		rec, err := s.source.Get(ctx, h.rec.ID)
		if err == nil && rec.State == actions.Claimed && rec.Holder == string(who) {
			s.log.Info("claim handed over to the wait", logkey.Identity, who, logkey.ActionID, rec.ID)
			return rec, true
		}
		if ctx.Err() != nil {
			return actions.Record{}, false
		}
		s.log.Info("claim made for a wake is no longer held", logkey.ActionID, h.rec.ID, logkey.Identity, who, logkey.Err, err)
	}
}

// expireHandover gives a claim made for a wake back to the board: no
// bee_wait_action took it within HandoverWithin.
func (s *Session) expireHandover(h *handover) {
	s.wk.mu.Lock()
	found := false
	for i, c := range s.wk.handed {
		if c == h {
			s.wk.handed = append(s.wk.handed[:i:i], s.wk.handed[i+1:]...)
			found = true
			break
		}
	}
	s.wk.mu.Unlock()
	if !found {
		return // a wait took it
	}
	ctx, cancel := context.WithTimeout(s.life, publishBound)
	defer cancel()
	_, err := s.source.Release(ctx, h.holder, h.rec.ID)
	switch {
	case err == nil:
		s.log.Info("claim made for a wake went back to the board: no bee_wait_action took it in time",
			logkey.ActionID, h.rec.ID, logkey.Identity, h.holder, logkey.Within, s.handoverWithin)
	case errors.Is(err, actions.ErrNotHeld), errors.Is(err, actions.ErrEnded):
		// A retire or the end of the session gave it back, or it ended.
	default:
		s.log.Warn("claim made for a wake not given back; it goes back when this identity departs", logkey.ActionID, h.rec.ID, logkey.Err, err)
	}
}

// dropHandovers forgets every handover and stops its timer: the session is
// departing, which gives the claims back.
func (s *Session) dropHandovers() {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	for _, h := range s.wk.handed {
		h.timer.Stop()
	}
	s.wk.handed = nil
	s.wk.dropHeld("")
}

// publishArmed records, for people (bee agents), whether who's session has
// a waiter armed. The write happens in the background, latest state first.
func (s *Session) publishArmed(who identity.ID, armed bool) {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	if s.wk.closed || s.wk.want == (armState{who, armed}) {
		return
	}
	s.wk.want = armState{who, armed}
	if s.wk.pubDone == nil {
		s.wk.pubDone = make(chan struct{})
		go s.publish(s.life, s.wk.pubDone)
	}
	select {
	case s.wk.kick <- struct{}{}:
	default:
	}
}

// republishArmed writes the armed state again, if a waiter is armed: the
// identity it names has just joined.
func (s *Session) republishArmed() {
	s.wk.mu.Lock()
	defer s.wk.mu.Unlock()
	if s.wk.closed || s.wk.pubDone == nil || !s.wk.want.armed {
		return
	}
	s.wk.gen++
	select {
	case s.wk.kick <- struct{}{}:
	default:
	}
}

// publish writes the armed state whenever it changes, until ctx ends.
func (s *Session) publish(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	var applied armState
	appliedGen := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wk.kick:
		}
		s.wk.mu.Lock()
		want, gen := s.wk.want, s.wk.gen
		s.wk.mu.Unlock()
		if want == applied && gen == appliedGen {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, publishBound)
		err := s.source.SetWaiter(wctx, want.who, want.armed)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("waiter state not recorded on the board", logkey.Identity, want.who, logkey.Armed, want.armed, logkey.Err, err)
			}
			continue
		}
		applied, appliedGen = want, gen
	}
}

// closeWake stops the wake-on-work state: no waiter registers, every
// handover and reminder timer stops. Close calls it, after it has cut the
// session's lifetime short (which ends the armed state's writer), and
// waits for that writer here.
func (s *Session) closeWake() {
	s.wk.mu.Lock()
	s.wk.closed = true
	for _, h := range s.wk.handed {
		h.timer.Stop()
	}
	s.wk.handed = nil
	s.wk.dropHeld("")
	done := s.wk.pubDone
	s.wk.mu.Unlock()
	if done != nil {
		<-done
	}
}

// replaceDeparted mints and joins a new identity in place of who when the
// source says who has departed though this session never departed it (its
// lease ran out while the process was stopped, say): the session carries on
// instead of refusing every call. It returns the identity now current, and
// errBridgeDeparted after Depart.
func (s *Session) replaceDeparted(ctx context.Context, who identity.ID) (identity.ID, error) {
	s.retireMu.Lock()
	defer s.retireMu.Unlock()
	s.mu.Lock()
	switch {
	case s.departed:
		s.mu.Unlock()
		return "", errBridgeDeparted
	case s.id != who:
		cur := s.id
		s.mu.Unlock()
		return cur, nil // replaced or retired already
	}
	sessionID := s.sessionID
	s.mu.Unlock()
	next, err := identity.Mint(s.agent)
	if err != nil {
		return "", err
	}
	if err := s.source.Join(ctx, s.member(next, sessionID)); err != nil {
		return "", fmt.Errorf("join %s in place of %s, which has departed: %w", next, who, err)
	}
	s.mu.Lock()
	s.id = next
	s.wk.mu.Lock()
	s.wk.me = next
	s.wk.dropHeld(who)
	s.wk.mu.Unlock()
	s.idCancel()
	s.idCtx, s.idCancel = context.WithCancel(s.life)
	s.mu.Unlock()
	s.log.Warn("identity found departed on the board (its lease ran out, or its process was taken for dead); carrying on under a new one",
		logkey.Previous, who, logkey.Identity, next)
	return next, nil
}

// ReminderLine is the one line that wakes a session about a claim a wait
// handed over that it has not acted on since its turn ended (held.go). It
// is bounded as WakeLine is, and a long title does not push out what to
// do.
func ReminderLine(r actions.Record) string {
	title := `"` + textcut.Within(oneLine(r.Title), 60) + `"`
	line := fmt.Sprintf("bee: action %s %s from %s is still yours, unfinished, since your turn ended; call %s to get it back, then do it or release it.",
		r.ID, title, textcut.Within(oneLine(r.From), 70), ToolWait)
	return textcut.Within(oneLine(line), MaxWakeLine)
}

// WakeLine is the one line a wake shows the model: what the news is and
// what to do about it, with control characters turned into spaces and at
// most MaxWakeLine bytes.
func WakeLine(who identity.ID, n actions.Notice) string {
	r := n.Record
	if line, ok := answerLine(r); ok && n.Kind == actions.NoticeOutcome {
		return line
	}
	title := `"` + textcut.Within(oneLine(r.Title), 100) + `"`
	var line string
	switch {
	case n.Kind == actions.NoticeWork:
		line = fmt.Sprintf("bee: action %s %s from %s is waiting for %s; call %s to take it.", r.ID, title, r.From, who, ToolWait)
	case r.State == actions.Failed:
		line = fmt.Sprintf("bee: action %s you posted (%s) failed, said %s: %s", r.ID, title, r.EndedBy, oneLine(r.Reason))
	case r.State == actions.Cancelled:
		line = fmt.Sprintf("bee: action %s you posted (%s) was cancelled by %s", r.ID, title, r.EndedBy)
		if r.Reason != "" {
			line += ": " + oneLine(r.Reason)
		}
	default:
		line = fmt.Sprintf("bee: action %s you posted (%s) is done by %s", r.ID, title, r.EndedBy)
		if r.Result != "" {
			line += ": " + oneLine(r.Result)
		}
	}
	return textcut.Within(oneLine(line), MaxWakeLine)
}

// oneLine turns control characters (newlines among them, and the Unicode
// line and paragraph separators) into spaces, collapses runs of spaces and
// makes s valid UTF-8.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
