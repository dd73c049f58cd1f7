package boardpage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
)

const (
	// keepAlive is how often an idle event stream gets a comment, so that a
	// browser that has gone without closing its connection is noticed.
	keepAlive = 25 * time.Second
	// eventWriteTimeout bounds one write to an event stream.
	eventWriteTimeout = 10 * time.Second
	// retryAfterError is how long the watcher waits after the board failed
	// it before it asks again.
	retryAfterError = time.Second
	// reconnectMillis tells the browser how soon to reconnect a stream.
	reconnectMillis = 1000
)

// A hub tells every open event stream that the board changed: each change
// bumps the version and closes the channel the streams wait on.
type hub struct {
	mu      sync.Mutex
	ver     uint64
	changed chan struct{} // closed, and replaced, at each bump
	streams int           // open event streams
}

func (h *hub) init() { h.changed = make(chan struct{}) }

// version returns the current version.
func (h *hub) version() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ver
}

// current returns the version and the channel closed at the next bump.
func (h *hub) current() (uint64, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ver, h.changed
}

// bump records a change and wakes every stream.
func (h *hub) bump() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ver++
	close(h.changed)
	h.changed = make(chan struct{})
}

// open and closed count the streams, so the watcher compares the agents
// only while someone is looking. open refuses (false) a stream beyond max.
func (h *hub) open(max int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams >= max {
		return false
	}
	h.streams++
	return true
}

func (h *hub) closed() {
	h.mu.Lock()
	h.streams--
	h.mu.Unlock()
}

func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams > 0
}

// watch is the Server's one watcher: it waits on Board.Changes and bumps
// the hub at each change, and while a page is open it compares the live
// agents and reservations every memberEvery (joins, waiter changes and
// reservations reach no Changes). It returns when the lifetime context
// ends.
func (s *Server) watch() {
	ctx := s.ctx
	var cursor actions.Cursor
	haveCursor := false
	lastAgents := ""
	for ctx.Err() == nil {
		if !haveCursor {
			c, err := s.board.Head(ctx)
			if err != nil {
				s.watchFailed(ctx, "head", err)
				continue
			}
			cursor, haveCursor = c, true
			// A change made before this head (a post while the watcher
			// started, or while the board failed) has no record after
			// it: a page open since then must look again.
			s.hub.bump()
		}
		page, err := s.board.Changes(ctx, cursor, s.memberEvery)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, actions.ErrBadCursor):
			haveCursor = false
			s.hub.bump()
			continue
		case err != nil:
			s.watchFailed(ctx, "changes", err)
			continue
		}
		cursor = page.Cursor
		if len(page.Records) > 0 {
			s.hub.bump()
			continue
		}
		if !s.hub.watched() {
			continue
		}
		agents, err := s.agentsKey(ctx)
		if err != nil {
			s.watchFailed(ctx, "members", err)
			continue
		}
		if agents != lastAgents {
			lastAgents = agents
			s.hub.bump()
		}
	}
}

// watchFailed logs a failed look at the board and waits a moment (or until
// ctx ends) before the next.
func (s *Server) watchFailed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.logger.Warn("board page watcher: board failed", logkey.Op, what, logkey.Err, err)
	t := time.NewTimer(retryAfterError)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// agentsKey sums up what the page shows of the live agents and their
// reservations, to notice a change.
func (s *Server) agentsKey(ctx context.Context) (string, error) {
	members, err := s.board.Members(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range members {
		waiter := int64(0)
		if m.WaiterSince != nil {
			waiter = m.WaiterSince.UnixMilli()
		}
		fmt.Fprintf(&b, "%s|%d|%d|%s|%s|%d|%s\n", m.ID, m.PID, m.ClaudePID, m.SessionID, m.Client, waiter, strings.Join(slices.Clone(m.Holding), ","))
	}
	rs, err := s.reservationsKey(ctx)
	if err != nil {
		return "", err
	}
	return b.String() + rs, nil
}

// handleEvents streams server-sent events: "change" with the hub's version,
// once at the start and then at every change. The page fetches the
// fragment when the version differs from the one it shows. The stream ends
// when the browser goes or the Server closes. A stream beyond
// MaxEventStreams is refused with 503.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ *session) {
	if !s.hub.open(MaxEventStreams) {
		s.logger.Warn("board page request refused", logkey.Reason, "too many event streams", logkey.Limit, MaxEventStreams)
		s.deny(w, http.StatusServiceUnavailable, fmt.Sprintf("Too many open pages: the board page keeps %d live at once.", MaxEventStreams),
			"Close some of the board's tabs or windows, then reload.")
		return
	}
	defer s.hub.closed()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	write := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)); err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: %d\n\n", reconnectMillis) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	sent := uint64(0)
	first := true
	for {
		ver, changed := s.hub.current()
		if first || ver != sent {
			if !write("event: change\ndata: %d\n\n", ver) {
				return
			}
			sent, first = ver, false
		}
		select {
		case <-changed:
		case <-tick.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}
