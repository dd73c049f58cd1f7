package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/runfile"
)

// The waiter's bounds.
const (
	// DefaultBridgeWithin is how long the waiter waits for a live bridge
	// to register its run file: at SessionStart the waiter can start before
	// the bridge has written it, and after a /mcp reconnect the new bridge
	// writes its own.
	DefaultBridgeWithin = 30 * time.Second
	// HookTimeout is the timeout the hook configuration gives the waiter,
	// in seconds: a day. Claude Code kills the hook then, without a wake.
	HookTimeout = 86400
	// DefaultRearmAfter is when the waiter asks the bridge for a re-arm
	// wake: ten minutes before Claude Code's timeout, so that the session is
	// never left without a waiter. It costs one model turn a day.
	DefaultRearmAfter = HookTimeout*time.Second - 10*time.Minute
	// pollEvery is how often the waiter looks for a run file.
	pollEvery = 100 * time.Millisecond
	// maxRegistrations bounds how many bridges one waiter registers with
	// (one more per /mcp reconnect), so that nothing can keep it going in a
	// loop.
	maxRegistrations = 100
)

// ExitWake is the exit status of a waiter that wakes the session: Claude
// Code starts a turn and shows the model the hook's stderr.
const ExitWake = 2

// WaitInput is the part of Claude Code's Stop or SessionStart hook input
// the waiter reads. stop_hook_active is deliberately ignored: it is true
// after every woken turn, and the waiter must re-arm then too.
type WaitInput struct {
	SessionID     string `json:"session_id"`
	HookEventName string `json:"hook_event_name"`
	Source        string `json:"source"`
}

// WaitConfig configures Wait. The zero value of each field is documented.
type WaitConfig struct {
	// Attended says the session is interactive
	// (CLAUDE_CODE_SESSION_ATTENDED=1). false: Wait returns at once without
	// waking, since in `claude -p` a waiter would block or delay the run.
	Attended bool
	// Bridge says where the bridge to wait on is, as for the /clear hook.
	Bridge
	// BridgeWithin bounds each wait for a live bridge's run file; 0 means
	// DefaultBridgeWithin.
	BridgeWithin time.Duration
	// RearmAfter is when, counted from the start, the bridge answers with a
	// re-arm wake; 0 means DefaultRearmAfter.
	RearmAfter time.Duration
	// MaxInput bounds the input in bytes; 0 means DefaultMaxInput.
	MaxInput int64
	// PID is this waiter's process id, for the bridge's log; 0 means
	// os.Getpid().
	PID int
	// WaitForWork long-polls a bridge; nil means wire.WaitForWork.
	WaitForWork func(ctx context.Context, port int, token string, req wire.WaitRequest) (wire.WaitResponse, error)
}

// A WaitResult is how the waiter ends: Code ExitWake with the wake line in
// Line, or 0 with a line saying why there was no wake ("" for none). Line
// is always one line and goes to stderr.
type WaitResult struct {
	Code int
	Line string
}

// Wait is bee-hook --wait-for-work, the wake-on-work waiter: an
// asyncRewake hook on Stop and SessionStart. It reads the hook input,
// finds its bridge like the /clear hook does (waiting up to BridgeWithin
// for its run file), and long-polls the bridge's POST /wait-for-work until
// the bridge answers.
//
// It returns ExitWake only when the bridge says to wake the session, with
// the bridge's line; every other end, every error among them, is 0: a
// waiter must never start a turn by mistake. When the bridge goes away (it
// answers "shutting down", or the connection drops, as on a /mcp
// reconnect), Wait looks for the new bridge's run file and registers with
// it, so the session is not left deaf. It never writes stdout, and it
// returns at once when ctx ends (SIGTERM, as Claude Code sends at /exit).
func Wait(ctx context.Context, cfg WaitConfig, stdin io.Reader) (res WaitResult) {
	if !cfg.Attended {
		return WaitResult{}
	}
	if cfg.BridgeWithin <= 0 {
		cfg.BridgeWithin = DefaultBridgeWithin
	}
	if cfg.RearmAfter <= 0 {
		cfg.RearmAfter = DefaultRearmAfter
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = DefaultMaxInput
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	if cfg.WaitForWork == nil {
		cfg.WaitForWork = wire.WaitForWork
	}
	cfg.Bridge = cfg.Bridge.withDefaults()
	defer func() {
		if r := recover(); r != nil {
			res = WaitResult{Line: fmt.Sprintf("bee-hook: internal error: %v", r)}
		}
		res.Line = strings.TrimSpace(oneLine(res.Line))
		if res.Code == ExitWake && res.Line == "" {
			res = WaitResult{Line: "bee-hook: the bridge asked for a wake without a line; not waking"}
		}
	}()
	return wait(ctx, cfg, stdin)
}

func wait(ctx context.Context, cfg WaitConfig, stdin io.Reader) WaitResult {
	start := time.Now()
	var in WaitInput
	if err := readJSONInput(stdin, cfg.MaxInput, &in); err != nil {
		return WaitResult{Line: "bee-hook: cannot read the hook input: " + err.Error()}
	}
	switch in.HookEventName {
	case "", "Stop", "SessionStart":
	default:
		return WaitResult{Line: fmt.Sprintf("bee-hook: ignoring a %s input; the waiter runs on Stop and SessionStart", in.HookEventName)}
	}
	dir, claudePID, msg := whoseBridge(ctx, cfg)
	if msg != "" {
		return WaitResult{Line: msg}
	}

	var lost string // the token of the bridge last waited on, once it has gone
	for range maxRegistrations {
		e, msg := waitForBridge(ctx, cfg, dir, claudePID, lost)
		if msg != "" {
			return WaitResult{Line: msg}
		}
		rearm := max(int((cfg.RearmAfter - time.Since(start)).Seconds()), 1)
		resp, err := cfg.WaitForWork(ctx, e.Port, e.Token, wire.WaitRequest{
			PID:           cfg.PID,
			SessionID:     in.SessionID,
			HookEventName: in.HookEventName,
			RearmSeconds:  rearm,
		})
		se, isStatus := errors.AsType[*wire.StatusError](err)
		switch {
		case ctx.Err() != nil:
			return WaitResult{Line: "bee-hook: waiter stopped: " + context.Cause(ctx).Error()}
		case err == nil && resp.Wake:
			return WaitResult{Code: ExitWake, Line: resp.Line}
		case err == nil && resp.Reason == wire.ReasonShuttingDown,
			errors.Is(err, wire.ErrConnectionLost),
			errors.Is(err, wire.ErrNotListening),
			isStatus && se.Code == 401:
			// The bridge went away (a /mcp reconnect, or the session is
			// ending), or the run file changed under us: look for its
			// successor.
			lost = e.Token
		case err == nil:
			return WaitResult{Line: "bee-hook: waiter ends without a wake: " + resp.Reason}
		default:
			return WaitResult{Line: scrub(fmt.Sprintf("bee-hook: waiter ends (bridge pid %d, port %d): %v", e.PID, e.Port, err), e.Token)}
		}
	}
	return WaitResult{Line: fmt.Sprintf("bee-hook: waiter ends after %d bridges came and went", maxRegistrations)}
}

// whoseBridge is the run directory and the Claude process whose bridge to
// wait on; msg says why there is none.
func whoseBridge(ctx context.Context, cfg WaitConfig) (dir string, claudePID int, msg string) {
	dir, err := runfile.Dir(cfg.RunDir)
	if err != nil {
		return "", 0, "bee-hook: " + err.Error()
	}
	if cfg.ClaudePID != 0 {
		return dir, cfg.ClaudePID, ""
	}
	pid, ok, err := cfg.FindClaude(ctx)
	switch {
	case err != nil:
		return "", 0, "bee-hook: cannot look for the claude process: " + err.Error()
	case !ok:
		return "", 0, "bee-hook: no claude process above this hook; no session to wake"
	}
	return dir, pid, ""
}

// waitForBridge waits up to cfg.BridgeWithin for the run file of claudePID
// to name a live bridge other than the one whose token is avoid ("" for
// none). It gives up at once when the Claude process is gone. A run file
// whose bridge is dead is removed (only while it still holds that bridge's
// token), so it cannot outlive the session. msg says why there is none.
func waitForBridge(ctx context.Context, cfg WaitConfig, dir string, claudePID int, avoid string) (e runfile.Entry, msg string) {
	deadline := time.Now().Add(cfg.BridgeWithin)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last string  // what the last look found wanting
	var swept string // what a stale run file removed by this wait was
	for {
		if !cfg.Alive(claudePID) {
			return e, fmt.Sprintf("bee-hook: claude pid %d is gone; no session to wake", claudePID)
		}
		var err error
		e, err = runfile.Read(dir, claudePID)
		switch {
		case avoid != "" && (errors.Is(err, fs.ErrNotExist) || err == nil && e.Token == avoid):
			last = fmt.Sprintf("the bridge of claude pid %d went away and no new one registered", claudePID)
		case errors.Is(err, fs.ErrNotExist) && swept != "":
			last = "removed the " + swept + ", and no live bridge registered"
		case errors.Is(err, fs.ErrNotExist):
			last = fmt.Sprintf("no bridge registered for claude pid %d in %s", claudePID, dir)
		case err != nil:
			last = err.Error()
		case !cfg.Alive(e.PID):
			last = fmt.Sprintf("stale run file for dead bridge pid %d (claude pid %d)", e.PID, claudePID)
			if removed, rerr := runfile.Remove(dir, claudePID, e.Token); rerr == nil && removed {
				swept = fmt.Sprintf("stale run file of dead bridge pid %d (claude pid %d)", e.PID, claudePID)
				last = "removed the " + swept + ", and no live bridge registered"
			}
		default:
			lerr := cfg.Listener(e.PID, e.Port)
			if lerr == nil || errors.Is(lerr, errors.ErrUnsupported) {
				return e, ""
			}
			last = fmt.Sprintf("not sending the token to port %d: %v (the bridge, pid %d, may be restarting, or another process holds its port)", e.Port, lerr, e.PID)
		}
		if time.Now().After(deadline) {
			return runfile.Entry{}, fmt.Sprintf("bee-hook: %s after %s; this session is not woken until its next turn ends", last, cfg.BridgeWithin)
		}
		select {
		case <-ctx.Done():
			return runfile.Entry{}, "bee-hook: waiter stopped: " + context.Cause(ctx).Error()
		case <-tick.C:
		}
	}
}
