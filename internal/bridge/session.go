// Package bridge is bee-mcp's core: the Session that holds this Claude Code
// session's identity on an action source, and the MCP tools that serve it.
//
// A Session promises that:
//   - its identity changes only by Retire, which mints the new identity
//     before it reports the old one's departure, and never goes back, or
//     when the source reports the current identity departed though the
//     session never departed it (its lease ran out while the process was
//     stopped): then it mints and joins a new one and carries on;
//   - a wait running under an identity that is retired ends at once and
//     claims nothing for the departed identity;
//   - Depart gives the identity's claims back, and after it no tool claims
//     anything;
//   - it serves bee-hook's wake-on-work waiter (WaitForWork): see wake.go
//     for what a waiter is promised.
//
// A claim a wait makes goes back when its answer cannot reach a reader:
// the call was cancelled (also when the cancel crosses the answer), the
// answer could not be written or came after the connection closed (the
// transport hands it to GiveBackUndelivered), or the session departs. A
// claim the board no longer shows held when the wait would hand it over
// (this process was stopped past its lease) is not handed over. What no
// server can see is a client that drops a call without a cancel and keeps
// the connection open: the answer is written into a pipe nobody reads, and
// nothing in MCP acknowledges a response. Waits on one connection run side
// by side, each with an action of its own (the subagents of a session
// share the connection), so no wait may end another; instead:
//   - a wait reports progress every 2 s, so only an absurd client idle
//     timeout can abandon it;
//   - no action stays held silently by a session that will not act on it:
//     a claim a wait handed over that nothing has finished, failed or
//     released RemindAfter (30 s) after a turn of the session ended (a
//     waiter registered) is handed over again, once: the waiter wakes the
//     session about it, its next bee_wait_action returns it at once, and
//     if none does within HandoverWithin (2 min) it goes back to the
//     board. held.go has the rule in full.
//
// A Session has one lifetime: every background write it makes (the armed
// state for people, give-backs, a handover's or a reminder's release) runs
// on a context that Close cancels, so Close cuts them all short in one
// place.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/logkey"
)

// Config configures a Session. The zero value of each field is documented.
type Config struct {
	// Agent is the agent name identities are minted for. Required.
	Agent string
	// Source is where actions come from. nil means actions.NoActions.
	Source actions.Source
	// ClaudePID is the Claude Code process this bridge belongs to; 0 means
	// none was found.
	ClaudePID int
	// Client is the agent CLI of ClaudePID's process ("claude", "codex",
	// "gemini"), recorded on the board's member row; "" when unknown.
	Client string
	// SessionID is the Claude Code session at start (CLAUDE_CODE_SESSION_ID),
	// "" when unknown.
	SessionID string
	// Logger receives the session's logs; nil discards them.
	Logger *slog.Logger
	// HandoverWithin is how long a claim made for a wake waits for the
	// session's next bee_wait_action before it goes back to the board; 0
	// means DefaultHandoverWithin.
	HandoverWithin time.Duration
	// RemindAfter is how long a claim a wait handed over may stay without
	// a finish, fail or release after a turn of the session ended, before
	// the session is reminded of it (held.go); 0 means DefaultRemindAfter.
	RemindAfter time.Duration
	// Dir is the session's working directory, whose repository its tools
	// reserve paths in (reserve.go); "" means the process's.
	Dir string
}

// A Session is one bridge's seat on the board. Its methods are safe for
// concurrent use.
type Session struct {
	// Fixed at creation.
	agent     string
	source    actions.Source
	claudePID int
	client    string
	pid       int
	started   time.Time
	log       *slog.Logger
	// handoverWithin bounds a claim made for a wake (see wake.go), and
	// remindAfter a claim nobody acts on (held.go).
	handoverWithin time.Duration
	remindAfter    time.Duration
	res            reservations // the session's repository and the guard's locator
	// life is the session's lifetime: every background write runs on it,
	// and Close cancels it.
	life    context.Context
	endLife context.CancelFunc

	wk wakeState // wake on work, with its own lock
	gb giveBacks // claims whose answer was not delivered, with its own lock

	retireMu sync.Mutex // serializes Retire and Depart: no identity is retired twice

	mu         sync.Mutex // guards the fields below
	id         identity.ID
	sessionID  string
	transcript string
	retired    int
	departed   bool
	// undeparted holds retired identities whose departure could not be
	// reported; Depart reports them again.
	undeparted []identity.ID
	// idCtx ends when id stops being this session's identity (retire or
	// depart), so that a wait under it ends and claims nothing for it.
	idCtx    context.Context
	idCancel context.CancelFunc
}

// errBridgeDeparted is returned by tools and Retire after Depart. It is an
// actions.ErrDeparted (errors.Is): the session's identity has departed, for
// good, and no new one follows.
var errBridgeDeparted error = bridgeDeparted{}

type bridgeDeparted struct{}

func (bridgeDeparted) Error() string { return "this bridge has departed from the board" }
func (bridgeDeparted) Unwrap() error { return actions.ErrDeparted }

// NewSession mints the first identity and joins it to the source.
func NewSession(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Source == nil {
		cfg.Source = actions.NoActions{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HandoverWithin <= 0 {
		cfg.HandoverWithin = DefaultHandoverWithin
	}
	if cfg.RemindAfter <= 0 {
		cfg.RemindAfter = DefaultRemindAfter
	}
	id, err := identity.Mint(cfg.Agent)
	if err != nil {
		return nil, err
	}
	s := &Session{
		agent:     cfg.Agent,
		source:    cfg.Source,
		claudePID: cfg.ClaudePID,
		client:    cfg.Client,
		pid:       os.Getpid(),
		started:   time.Now(),
		log:       cfg.Logger,
		id:        id,
		sessionID: cfg.SessionID,

		handoverWithin: cfg.HandoverWithin,
		remindAfter:    cfg.RemindAfter,
		res:            newReservations(cfg.Dir, cfg.Logger),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.wk.init(id)
	s.idCtx, s.idCancel = context.WithCancel(s.life)
	if err := s.source.Join(ctx, s.member(id, cfg.SessionID)); err != nil {
		s.endLife()
		return nil, fmt.Errorf("join %s to the %s source: %w", id, s.source.Name(), err)
	}
	s.log.Info("identity minted", logkey.Identity, id, logkey.ClaudePID, cfg.ClaudePID, logkey.Source, s.source.Name())
	return s, nil
}

func (s *Session) member(id identity.ID, sessionID string) actions.Member {
	return actions.Member{ID: id, PID: s.pid, ClaudePID: s.claudePID, SessionID: sessionID, Client: s.client}
}

// Identity returns the current identity.
func (s *Session) Identity() identity.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// current returns the identity with the context that ends when it stops
// being current, or errBridgeDeparted.
func (s *Session) current() (identity.ID, context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.departed {
		return "", nil, errBridgeDeparted
	}
	return s.id, s.idCtx, nil
}

// Whoami is what bee_whoami reports.
type Whoami struct {
	Identity       string `json:"identity"`
	Agent          string `json:"agent"`
	ClaudePID      *int   `json:"claudePid"` // null when there is no Claude ancestor
	SessionID      string `json:"sessionId"`
	TranscriptPath string `json:"transcriptPath,omitempty"`
	Source         string `json:"source"`
	PID            int    `json:"pid"`
	Retired        int    `json:"retired"` // identities this bridge has retired so far
	Since          string `json:"since"`   // when the bridge started, RFC 3339
	// Client is the MCP client on this connection and its version, as its
	// handshake named it ("Codex CLI 0.171.0"); set by bee_whoami.
	Client string `json:"client,omitempty"`
	// Repo is the repository the session works in, whose paths its
	// reservations name; "" when bee cannot tell.
	Repo string `json:"repo,omitempty"`
}

// Whoami reports the session as bee_whoami shows it.
func (s *Session) Whoami() Whoami {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := Whoami{
		Identity:       string(s.id),
		Agent:          s.agent,
		SessionID:      s.sessionID,
		TranscriptPath: s.transcript,
		Source:         s.source.Name(),
		PID:            s.pid,
		Retired:        s.retired,
		Since:          s.started.UTC().Format(time.RFC3339),
		Repo:           s.res.repo.Name,
	}
	if s.claudePID != 0 {
		pid := s.claudePID
		w.ClaudePID = &pid
	}
	return w
}

// Retire replaces the current identity with a freshly minted one, records
// the new Claude Code session it now serves, and reports the old identity's
// departure to the source, which gives its claims back. It mints first:
// when the report fails, the error is returned but the session stays on the
// new identity. What the old identity held goes to the other live
// identities of the agent: the new identity is not woken for it, unless it
// is the agent's only live identity. After Depart it returns an error that
// wraps actions.ErrDeparted. ctx is the control channel's lifetime, not a
// request's: Retire runs to its end even when the hook that asked hangs up.
func (s *Session) Retire(ctx context.Context, req RetireRequest) (Retirement, error) {
	s.retireMu.Lock()
	defer s.retireMu.Unlock()
	start := time.Now()
	next, err := identity.Mint(s.agent)
	if err != nil {
		return Retirement{}, err
	}
	dropped := s.droppedOnRetire(ctx, s.Identity())
	s.mu.Lock()
	if s.departed {
		s.mu.Unlock()
		return Retirement{}, errBridgeDeparted
	}
	old := s.id
	s.id = next
	s.wk.switchTo(next, old, dropped)
	if req.SessionID != "" {
		s.sessionID = req.SessionID
	}
	if req.TranscriptPath != "" {
		s.transcript = req.TranscriptPath
	}
	s.retired++
	s.idCancel()
	s.idCtx, s.idCancel = context.WithCancel(s.life)
	sessionID := s.sessionID
	s.mu.Unlock()

	res := Retirement{Retired: old, Current: next}
	var errs []error
	if err := s.source.Join(ctx, s.member(next, sessionID)); err != nil {
		errs = append(errs, err)
	} else {
		s.republishArmed() // the waiter carries on as next, which has only now joined
	}
	if err := s.source.Depart(ctx, old); err != nil {
		// Depart tries it again: the old identity's claims must not wait
		// out a lease because a retire was cut short.
		s.mu.Lock()
		s.undeparted = append(s.undeparted, old)
		s.mu.Unlock()
		errs = append(errs, fmt.Errorf("report departure of %s: %w", old, err))
	}
	err = errors.Join(errs...)
	if err != nil {
		s.log.Error("retire report failed", logkey.Previous, old, logkey.Identity, next, logkey.Err, err)
		return res, err
	}
	s.log.Info("identity retired", logkey.Previous, old, logkey.Identity, next,
		logkey.SessionID, sessionID, logkey.Elapsed, time.Since(start))
	return res, nil
}

// Depart ends the session on the board: the current identity departs (its
// claims go back to open) and every later tool call is refused. Depart may
// be called more than once; only the first call reports.
func (s *Session) Depart(ctx context.Context) error {
	s.retireMu.Lock()
	defer s.retireMu.Unlock()
	s.mu.Lock()
	if s.departed {
		s.mu.Unlock()
		return nil
	}
	s.departed = true
	ids := append([]identity.ID{s.id}, s.undeparted...)
	s.undeparted = nil
	s.idCancel()
	s.mu.Unlock()
	s.dropHandovers() // the departure gives their claims back, and the held ones
	start := time.Now()
	var errs []error
	for _, id := range ids {
		if err := s.source.Depart(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("depart %s: %w", id, err))
			continue
		}
		s.log.Info("identity departed", logkey.Identity, id, logkey.Elapsed, time.Since(start))
	}
	return errors.Join(errs...)
}

// endedWhileWaiting explains to the model why a wait under who ended: the
// session was cleared (who was retired), or this bridge is shutting down.
// A shutdown reads as final unless the model is told that a /mcp reconnect
// starts a new bridge, which serves the same tools.
func (s *Session) endedWhileWaiting(who identity.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.departed {
		return fmt.Errorf("%w: the wait as %s ended because this bridge is shutting down (%s); call %s again", errBridgeDeparted, who, newBridgeTakesOver, ToolWait)
	}
	return fmt.Errorf("%w: it waited as %s, and you are now %s; call %s again", errRetired, who, s.id, ToolWait)
}

// newBridgeTakesOver says what follows a bridge's shutdown for a session
// that carries on.
const newBridgeTakesOver = "a /mcp reconnect or a restart starts a new bridge, which takes over with a fresh identity; the claims of this one went back to the board"

// Close ends the session's lifetime, which cuts every background write
// short, waits for its background work to end, and closes the source.
// Call it after Depart, which gives every claim back; Close may be called
// more than once.
func (s *Session) Close() error {
	s.stop()
	return s.source.Close()
}

// stop ends the session's lifetime and waits for its background work to
// end, leaving the source open.
func (s *Session) stop() {
	s.endLife()
	s.closeGiveBacks()
	s.closeWake()
}
