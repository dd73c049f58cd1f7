package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/internal/bridge"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/pathcheck"
	"github.com/tractat-us/bee/runfile"
)

// A channel is the bridge's control endpoint (/retire, /wait-for-work and
// /check-paths) together with the run file that tells bee-hook where it
// is. A nil *channel is a bridge without one.
type channel struct {
	srv       *clearctl.Server
	dir       string
	claudePID int
	token     string
	vanished  bool   // the run file was found missing (warned once)
	sibling   string // the token of a sibling bridge's run file (warned once)
}

// The control endpoint's sides: the bridge's session (or the Pending
// that will hold it) retires on /clear, holds wake-on-work waiters, and
// answers the edit and commit guards.
type controller interface {
	Retire(ctx context.Context, req bridge.RetireRequest) (bridge.Retirement, error)
	WaitForWork(ctx context.Context, req bridge.WaitRequest) bridge.WakeAnswer
	CheckPaths(ctx context.Context, paths []string) ([]pathcheck.Held, error)
}

// channelAdapter speaks clearctl's wire types to the bridge's own: the
// bridge does not depend on the transport that reaches it.
type channelAdapter struct{ c controller }

var (
	_ clearctl.Retirer     = channelAdapter{}
	_ clearctl.Waker       = channelAdapter{}
	_ clearctl.PathChecker = channelAdapter{}
)

func (a channelAdapter) Retire(ctx context.Context, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
	r, err := a.c.Retire(ctx, bridge.RetireRequest{SessionID: req.SessionID, TranscriptPath: req.TranscriptPath})
	return clearctl.RetireResponse{Retired: string(r.Retired), Current: string(r.Current)}, err
}

// WaitForWork tells the bridge a channel that closes from a waiter that
// went: the first is answered "shutting down" (the hook looks for a newer
// bridge), the second is not.
func (a channelAdapter) WaitForWork(ctx context.Context, req clearctl.WaitRequest) clearctl.WaitResponse {
	bctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if errors.Is(cause, clearctl.ErrClosed) {
			cause = bridge.ErrShuttingDown
		}
		cancel(cause)
	})
	defer stop()
	ans := a.c.WaitForWork(bctx, bridge.WaitRequest{
		PID:           req.PID,
		HookEventName: req.HookEventName,
		Rearm:         time.Duration(req.RearmSeconds) * time.Second,
	})
	return clearctl.WaitResponse{Wake: ans.Wake, Line: ans.Line, Reason: ans.Reason}
}

// openChannel starts the control server and writes the run file for
// claudePID. On error nothing is left behind.
func openChannel(dir string, claudePID int, r controller, log *slog.Logger) (*channel, error) {
	dir, err := runfile.Dir(dir)
	if err != nil {
		return nil, err
	}
	token, err := runfile.NewToken()
	if err != nil {
		return nil, err
	}
	a := channelAdapter{r}
	srv := clearctl.New(token, a, &clearctl.Options{Logger: log, Waker: a, PathChecker: a})
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start the /retire channel: %w", err)
	}
	entry := runfile.Entry{Port: srv.Port(), Token: token, PID: os.Getpid()}
	if err := runfile.Write(dir, claudePID, entry); err != nil {
		srv.Close()
		return nil, err
	}
	log.Info("control channel ready", logkey.Port, entry.Port, logkey.Path, runfile.Path(dir, claudePID))
	// Bridges killed without a word (SIGKILL) leave their run files: each
	// new bridge removes those whose bridge or Claude process is dead.
	swept, err := runfile.Sweep(dir, nil)
	for _, p := range swept {
		log.Info("removed a stale run file", logkey.Path, p)
	}
	if err != nil {
		log.Warn("cannot remove stale run files", logkey.Err, err)
	}
	return &channel{srv: srv, dir: dir, claudePID: claudePID, token: token}, nil
}

// takenOver reports whether the run file now belongs to a newer bridge of
// the same Claude process launched as this one was (a /mcp reconnect can
// abandon this one with its stdin open). A newer bridge launched otherwise
// is a sibling server, and this one keeps serving (see launch.go). A run
// file that has vanished is not written again: a newer bridge may be about
// to write its own, which must win.
func (c *channel) takenOver(log *slog.Logger) bool {
	e, err := runfile.Read(c.dir, c.claudePID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !c.vanished {
			c.vanished = true
			log.Warn("run file removed by someone else; /clear cannot reach this bridge until it restarts", logkey.Path, runfile.Path(c.dir, c.claudePID))
		}
		return false
	case err != nil:
		log.Warn("cannot read run file", logkey.Err, err)
		return false
	}
	if e.Token == c.token || e.Token == c.sibling {
		return false
	}
	sib, differs, err := sibling(e.PID)
	if err != nil || !sib {
		return true
	}
	c.sibling = e.Token
	log.Warn("another bee bridge under the same claude process, launched differently (the plugin and a project server both configured?), now holds the run file; this bridge keeps serving its client, but /clear retires only the other one's identity",
		logkey.BridgePID, e.PID, logkey.Differs, differs)
	return false
}

// close removes the run file, only while it holds this bridge's token, and
// stops the /retire server. It is safe on a nil *channel.
func (c *channel) close(log *slog.Logger) {
	if c == nil {
		return
	}
	if _, err := runfile.Remove(c.dir, c.claudePID, c.token); err != nil {
		log.Warn("run file not removed", logkey.Err, err)
	}
	if err := c.srv.Close(); err != nil {
		log.Warn("retire channel did not close cleanly", logkey.Err, err)
	}
}
