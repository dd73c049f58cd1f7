package hooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/tractat-us/bee/internal/liveness"
	"github.com/tractat-us/bee/internal/sockowner"
	"github.com/tractat-us/bee/runfile"
)

// A Bridge says where to find the bridge of the session a guard runs in,
// the way the /clear hook finds it: the nearest claude ancestor, its run
// file, a live bridge process that owns the recorded port. The zero value
// is what bee-hook uses in real life.
type Bridge struct {
	// RunDir is the run directory. "" means runfile.DefaultDir().
	RunDir string
	// ClaudePID is the Claude process whose bridge to ask. 0 means the one
	// FindClaude finds.
	ClaudePID int
	// FindClaude finds the Claude process when ClaudePID is 0. nil means
	// FindClaude.
	FindClaude func(ctx context.Context) (pid int, found bool, err error)
	// Alive reports whether the bridge process pid is alive. nil means
	// liveness.Alive.
	Alive func(pid int) bool
	// Listener checks that the bridge process pid is the one listening on
	// port before the token is sent there. nil means sockowner.Check; its
	// errors.ErrUnsupported (off Linux) lets the call go ahead.
	Listener func(pid, port int) error
}

// withDefaults is b with each nil func at its documented default.
func (b Bridge) withDefaults() Bridge {
	if b.FindClaude == nil {
		b.FindClaude = FindClaude
	}
	if b.Alive == nil {
		b.Alive = liveness.Alive
	}
	if b.Listener == nil {
		b.Listener = sockowner.Check
	}
	return b
}

// Reasons why no bridge is found, wrapped with the detail by find. Both
// mean no bee session: the caller is a person, or an agent session that
// runs without bee (or whose bridge is gone).
var (
	// errNoClaude: no claude process above this one.
	errNoClaude = errors.New("no claude process above this one")
	// errNoBridge: the Claude process has no run file, or its bridge is
	// dead.
	errNoBridge = errors.New("no live bridge")
)

// find returns the run file of the session's live bridge. Its errors wrap
// errNoClaude or errNoBridge when there is no bee session above this
// process, and say what went wrong otherwise (the run directory is unsafe,
// the run file unreadable, the port another process's). It removes
// nothing: a guard runs on every edit and must stay a reader.
func (b Bridge) find(ctx context.Context) (runfile.Entry, error) {
	b = b.withDefaults()
	dir, err := runfile.Dir(b.RunDir)
	if err != nil {
		return runfile.Entry{}, err
	}
	claudePID := b.ClaudePID
	if claudePID == 0 {
		pid, ok, err := b.FindClaude(ctx)
		switch {
		case err != nil:
			return runfile.Entry{}, fmt.Errorf("cannot look for the claude process: %w", err)
		case !ok:
			return runfile.Entry{}, errNoClaude
		}
		claudePID = pid
	}
	e, err := runfile.Read(dir, claudePID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return runfile.Entry{}, fmt.Errorf("%w: no bridge registered for claude pid %d in %s", errNoBridge, claudePID, dir)
	case err != nil:
		return runfile.Entry{}, err
	case !b.Alive(e.PID):
		return runfile.Entry{}, fmt.Errorf("%w: stale run file for dead bridge pid %d (claude pid %d)", errNoBridge, e.PID, claudePID)
	}
	if err := b.Listener(e.PID, e.Port); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return runfile.Entry{}, fmt.Errorf("not sending the token to port %d: %w; the bridge (pid %d) may be restarting, or another process holds its port", e.Port, err, e.PID)
	}
	return e, nil
}
