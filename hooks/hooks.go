// Package hooks owns bee's Claude Code hooks: the configuration that
// installs them (hooks.json, the plugin convention, see [ConfigJSON] and
// [ConfigFor]) and the logic of bee-hook, which is four hooks in one
// binary:
//
//   - the SessionStart hook that tells a session's bridge to retire its
//     identity when the user types /clear ([Run]);
//   - the wake-on-work waiter, an asyncRewake hook on Stop and SessionStart
//     that long-polls the bridge and wakes the idle session when there is
//     work for it ([Wait]);
//   - the edit guard, a PreToolUse hook on the file tools that denies an
//     edit of a file another live identity has reserved ([Guard]);
//   - git's pre-commit hook, which refuses a commit that changes a path
//     another live identity holds exclusively ([PreCommit]).
//
// The guards decide only on the bridge's (or bee's) word, and let the work
// through, saying so, whenever it cannot be had: they never block a
// person's work because bee is down, slow or confused. The guard returns
// its denial for the caller to print on stdout (the one thing a PreToolUse
// hook says there); it writes nothing itself.
//
// Run and Wait promise what a hook must: they never write stdout (Claude Code adds a
// SessionStart hook's stdout to the conversation), they always return
// normally, even if something they call panics, and what they return for
// stderr is at most one line that never holds the run file's token. Both
// send the token only when the run directory is the user's own and private
// (runfile.Read checks it) and, on Linux, the recorded port is the recorded
// bridge's own listening socket (sockowner.Check). Run is bounded by its
// timeout and retires only a bridge whose process is alive, so a stale run
// file can never retire another session's bridge. Wait returns ExitWake
// only when the bridge says to wake the session, and 0 on every other end,
// every error among them; it waits as long as the bridge holds it, and
// returns at once when its context ends.
package hooks

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/tractat-us/bee/ancestry"
	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/internal/textcut"
	"github.com/tractat-us/bee/runfile"
)

//go:embed hooks.json
var hooksJSON string

// ConfigJSON returns hooks/hooks.json: the hook configuration the bee
// plugin ships, which has the shape of the "hooks" block of settings.json.
// It is ConfigFor(PluginCommand).
func ConfigJSON() string { return hooksJSON }

// PluginCommand is how the plugin's hooks.json runs bee-hook: through the
// launcher in the plugin's folder, which finds the binary on PATH or where
// `go install` puts it, so that Claude Code needs no PATH of its own for it.
// Claude Code runs the command with /bin/sh -c, which expands
// ${CLAUDE_PLUGIN_ROOT}.
const PluginCommand = `"${CLAUDE_PLUGIN_ROOT}/plugin/bee-hook"`

// Text Claude Code shows for a wake, so that it reads as bee's: the line in
// the terminal, and the words before the hook's line that the model sees.
const (
	RewakeSummary = "bee: news from the action board"
	RewakeMessage = "bee, the shared action board this session has a seat on, woke it:"
)

// ConfigFor returns the hook configuration that runs bee-hook as command
// (shell words for /bin/sh -c, quoted as needed): the /clear hook on
// SessionStart with matcher "clear"; the wake-on-work waiter
// (command --wait-for-work, asyncRewake, timeout HookTimeout) on Stop and
// on SessionStart with no matcher, so that a fresh session nobody has typed
// into can be woken too; and the edit guard (command --guard, timeout
// GuardHookTimeout) on PreToolUse with matcher GuardMatcher.
func ConfigFor(command string) string {
	type hook struct {
		Type          string `json:"type"`
		Command       string `json:"command"`
		AsyncRewake   bool   `json:"asyncRewake,omitempty"`
		Timeout       int    `json:"timeout,omitempty"`
		RewakeSummary string `json:"rewakeSummary,omitempty"`
		RewakeMessage string `json:"rewakeMessage,omitempty"`
	}
	type matcher struct {
		Matcher string `json:"matcher,omitempty"`
		Hooks   []hook `json:"hooks"`
	}
	waiter := matcher{Hooks: []hook{{
		Type:          "command",
		Command:       command + " --wait-for-work",
		AsyncRewake:   true,
		Timeout:       HookTimeout,
		RewakeSummary: RewakeSummary,
		RewakeMessage: RewakeMessage,
	}}}
	cfg := struct {
		Hooks struct {
			SessionStart []matcher `json:"SessionStart"`
			Stop         []matcher `json:"Stop"`
			PreToolUse   []matcher `json:"PreToolUse"`
		} `json:"hooks"`
	}{}
	cfg.Hooks.SessionStart = []matcher{{Matcher: "clear", Hooks: []hook{{Type: "command", Command: command}}}, waiter}
	cfg.Hooks.Stop = []matcher{waiter}
	cfg.Hooks.PreToolUse = []matcher{{Matcher: GuardMatcher, Hooks: []hook{{
		Type:    "command",
		Command: command + " --guard",
		Timeout: GuardHookTimeout,
	}}}}
	return indentedJSON(cfg)
}

// indentedJSON is v as indented JSON with a trailing newline, "<" and ">"
// left as they are (shell commands hold them). v is plain structs of
// strings, which always encode.
func indentedJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.String()
}

const (
	// DefaultTimeout bounds a whole Run when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxInput bounds the SessionStart input when Config.MaxInput is
	// zero.
	DefaultMaxInput = 64 << 10
	// maxOutcome bounds the outcome line.
	maxOutcome = 1000
)

// Input is Claude Code's SessionStart hook input. Other fields (model, for
// one) are ignored.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	// Source is startup, resume, clear, compact or fork; only clear
	// retires anything.
	Source string `json:"source"`
}

// Config configures Run. The zero Config is what bee-hook uses in real life.
type Config struct {
	// Bridge says where the bridge to retire is: its zero value finds the
	// nearest claude ancestor (else $CLAUDE_PID when that is an ancestor)
	// and its run file in runfile.DefaultDir().
	Bridge
	// Timeout bounds the whole Run, reading the input included. 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxInput bounds the input in bytes. 0 means DefaultMaxInput.
	MaxInput int64
	// Retire asks the bridge to retire. nil means wire.Retire.
	Retire func(ctx context.Context, port int, token string, req wire.RetireRequest) (wire.RetireResponse, error)
}

// Run handles one SessionStart input read from stdin and returns the single
// line to print on stderr, without a trailing newline; "" means print
// nothing. It never writes stdout and always returns normally.
//
// Input that is larger than MaxInput or not a JSON object gives a line
// saying so. A source other than "clear" gives "". For "clear", Run finds
// the Claude process, reads its run file, checks that the bridge process is
// alive and then asks the bridge to retire, sending the new session's
// session_id and transcript_path. A run file whose bridge is dead is
// reported and removed (if it still holds the token read), and its port is
// never called. Every outcome of that, including no Claude process above
// the hook and no run file, is one line starting "bee-hook: ".
//
// Run gives up when Timeout has passed or ctx is done, and says so; work
// still blocked then (a stdin that never closes, a Retire that ignores its
// ctx) is abandoned in a goroutine, which is fine for a process about to
// exit.
func Run(ctx context.Context, cfg Config, stdin io.Reader) (outcome string) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = DefaultMaxInput
	}
	if cfg.Retire == nil {
		cfg.Retire = wire.Retire
	}
	cfg.Bridge = cfg.Bridge.withDefaults()
	outcome = bounded(ctx, cfg.Timeout,
		func(ctx context.Context) string { return handle(ctx, cfg, stdin) },
		func(cause error) string {
			if errors.Is(cause, context.DeadlineExceeded) {
				return fmt.Sprintf("bee-hook: gave up after %s", cfg.Timeout)
			}
			return fmt.Sprintf("bee-hook: stopped: %v", cause)
		},
		func(p any) string { return fmt.Sprintf("bee-hook: internal error: %v", p) })
	return oneLine(outcome)
}

// FindClaude finds the Claude process above this one: by name, else by
// $CLAUDE_PID when that is an ancestor (claude running under another
// name). found is false when there is none.
func FindClaude(ctx context.Context) (pid int, found bool, err error) {
	f, ok, err := ancestry.Find(ctx, ancestry.HookHints(os.Getenv))
	return f.PID, ok, err
}

// handle does Run's work; the token is scrubbed from what it returns.
func handle(ctx context.Context, cfg Config, stdin io.Reader) string {
	in, err := readInput(stdin, cfg.MaxInput)
	if err != nil {
		return "bee-hook: cannot read SessionStart input: " + err.Error()
	}
	if in.HookEventName != "" && in.HookEventName != "SessionStart" {
		return fmt.Sprintf("bee-hook: ignoring a %s input; bee-hook is a SessionStart hook (matcher \"clear\")", in.HookEventName)
	}
	if in.Source != "clear" {
		return ""
	}

	dir, err := runfile.Dir(cfg.RunDir)
	if err != nil {
		return "bee-hook: " + err.Error()
	}
	claudePID := cfg.ClaudePID
	if claudePID == 0 {
		pid, ok, err := cfg.FindClaude(ctx)
		if err != nil {
			return "bee-hook: cannot look for the claude process: " + err.Error()
		}
		if !ok {
			return "bee-hook: no claude process above this hook; nothing to retire"
		}
		claudePID = pid
	}

	e, err := runfile.Read(dir, claudePID)
	if errors.Is(err, fs.ErrNotExist) {
		msg := fmt.Sprintf("bee-hook: no bridge registered for claude pid %d in %s; nothing to retire", claudePID, dir)
		if p, err := ancestry.Process(ctx, claudePID); err == nil {
			if c, ok := ancestry.Identify(p); ok && !c.OwnsSession() {
				// Codex starts a new thread's bridge itself (see ancestry).
				msg += " (under Codex CLI each thread gets a bridge of its own, so a new thread has a new identity already)"
			}
		}
		return msg
	}
	if err != nil {
		return "bee-hook: " + err.Error() + "; remove it if no bridge is running"
	}
	return scrub(retire(ctx, cfg, dir, claudePID, e, in), e.Token)
}

// retire retires the bridge of run file e, unless its process is dead.
func retire(ctx context.Context, cfg Config, dir string, claudePID int, e runfile.Entry, in Input) string {
	if !cfg.Alive(e.PID) {
		msg := fmt.Sprintf("bee-hook: stale run file for dead bridge pid %d (claude pid %d); nothing to retire", e.PID, claudePID)
		removed, err := runfile.Remove(dir, claudePID, e.Token)
		switch {
		case err != nil:
			return msg + "; could not remove it: " + err.Error()
		case removed:
			return msg + "; removed " + runfile.Path(dir, claudePID)
		default:
			return msg + "; it has been replaced or removed since"
		}
	}
	if err := cfg.Listener(e.PID, e.Port); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Sprintf("bee-hook: not sending the token to port %d: %v; the bridge (pid %d) may be restarting, or another process holds its port", e.Port, err, e.PID)
	}
	resp, err := cfg.Retire(ctx, e.Port, e.Token, wire.RetireRequest{
		SessionID:      in.SessionID,
		TranscriptPath: in.TranscriptPath,
	})
	var se *wire.StatusError
	switch {
	case err == nil:
		return fmt.Sprintf("bee-hook: retired %s -> %s", resp.Retired, resp.Current)
	case errors.As(err, &se) && se.Code == 202:
		return "bee-hook: retire still running (202); the bridge finishes it on its own"
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Sprintf("bee-hook: retire failed: no answer from bridge pid %d on port %d within %s", e.PID, e.Port, cfg.Timeout)
	default:
		return fmt.Sprintf("bee-hook: retire failed (bridge pid %d, port %d): %v", e.PID, e.Port, err)
	}
}

// readInput reads at most max bytes of stdin, to EOF, as one JSON object.
func readInput(stdin io.Reader, max int64) (Input, error) {
	var in Input
	err := readJSONInput(stdin, max, &in)
	return in, err
}

// readJSONInput reads at most max bytes of stdin, to EOF, as one JSON
// object into v.
func readJSONInput(stdin io.Reader, max int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(stdin, max+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("larger than %d bytes", max)
	}
	return json.Unmarshal(data, v)
}

// scrub removes token from s, whatever put it there.
func scrub(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[token]")
}

// oneLine makes s a single printable line of at most maxOutcome bytes:
// valid UTF-8, control characters (newlines among them) as spaces.
func oneLine(s string) string {
	return textcut.Bytes(flatten(s), maxOutcome)
}
