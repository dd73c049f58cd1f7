package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/tractat-us/bee/clearctl/wire"
	"github.com/tractat-us/bee/internal/termtext"
	"github.com/tractat-us/bee/internal/textcut"
)

// The edit guard's bounds.
const (
	// DefaultGuardTimeout bounds a whole Guard, reading the input included,
	// when GuardConfig.Timeout is zero. Past it, the edit goes ahead
	// unchecked. It leaves the process's own start and end 300 ms of the
	// second the design allows the hook, and the bridge's answer (within
	// clearctl.DefaultCheckWithin) room to arrive first.
	DefaultGuardTimeout = 700 * time.Millisecond
	// DefaultGuardMaxInput bounds the PreToolUse input when
	// GuardConfig.MaxInput is zero. The input holds the whole content of a
	// Write, so it is large; a larger one is let through unchecked, and
	// said so.
	DefaultGuardMaxInput = 64 << 20
	// GuardMatcher is the PreToolUse matcher of the edit guard: Claude
	// Code's tools that write files.
	GuardMatcher = "Edit|Write|MultiEdit|NotebookEdit"
	// GuardHookTimeout is the timeout, in seconds, the hook configuration
	// gives the guard: far beyond its own bound, which ends it first. Claude
	// Code lets the edit through when it kills a hook that timed out.
	GuardHookTimeout = 10
	// maxReasonBytes bounds the holder's reason as a denial quotes it.
	maxReasonBytes = 300
)

// GuardInput is the part of Claude Code's PreToolUse hook input the guard
// reads. The tool's other arguments (a Write's content, an Edit's strings)
// are read past and dropped.
type GuardInput struct {
	SessionID     string `json:"session_id"`
	Cwd           string `json:"cwd"`
	HookEventName string `json:"hook_event_name"`
	ToolName      string `json:"tool_name"`
	ToolInput     struct {
		// FilePath is the file of Write, Edit and MultiEdit.
		FilePath string `json:"file_path"`
		// NotebookPath is the notebook of NotebookEdit.
		NotebookPath string `json:"notebook_path"`
	} `json:"tool_input"`
}

// GuardConfig configures Guard. The zero value is what bee-hook uses in
// real life.
type GuardConfig struct {
	// Bridge finds the session's bridge.
	Bridge Bridge
	// Timeout bounds the whole Guard. 0 means DefaultGuardTimeout.
	Timeout time.Duration
	// MaxInput bounds the input in bytes. 0 means DefaultGuardMaxInput.
	MaxInput int64
	// CheckPaths asks the bridge. nil means wire.CheckPaths.
	CheckPaths func(ctx context.Context, port int, token string, req wire.CheckPathsRequest) (wire.CheckPathsAnswer, error)
	// Getwd is the directory a relative path is taken from when the input
	// has no absolute cwd. nil means os.Getwd.
	Getwd func() (string, error)
	// Now is the time reservations' ages are counted to. nil means
	// time.Now.
	Now func() time.Time
}

// A GuardResult is the guard's decision: Deny, when not empty, is the one
// line that tells the model why the call is refused and what to do (print
// DenyOutput(Deny) on stdout); Line, when not empty, is one line for
// stderr, saying why the call was let through unchecked.
type GuardResult struct {
	Deny string
	Line string
}

// Guard is bee-hook --guard, the PreToolUse hook of Claude Code's file
// tools (GuardMatcher). It reads the hook input, takes the file the tool
// would write (tool_input.file_path, or notebook_path for NotebookEdit; a
// relative one is taken from the input's cwd), finds the session's bridge
// as the /clear hook does and asks it (POST /check-paths) whether another
// live identity holds that file.
//
// It denies only on the bridge's word: when the bridge names a conflict,
// Deny says who holds the file, why, for which action and what to do.
// Everything else allows: the bridge allows, there is no bee session
// (then silently), or anything goes wrong (no run file, a dead bridge, a
// bridge too old to serve /check-paths, a malformed answer, no answer
// within Timeout, input that cannot be read), and then Line says so. It
// never writes stdout itself, never holds the token in what it returns,
// and always returns normally within Timeout; work still blocked then (a
// stdin that never closes) is abandoned, which is fine for a process about
// to exit.
func Guard(ctx context.Context, cfg GuardConfig, stdin io.Reader) (res GuardResult) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultGuardTimeout
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = DefaultGuardMaxInput
	}
	if cfg.CheckPaths == nil {
		cfg.CheckPaths = wire.CheckPaths
	}
	if cfg.Getwd == nil {
		cfg.Getwd = os.Getwd
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	res = bounded(ctx, cfg.Timeout,
		func(ctx context.Context) GuardResult { return guard(ctx, cfg, stdin) },
		func(cause error) GuardResult {
			if errors.Is(cause, context.DeadlineExceeded) {
				return GuardResult{Line: fmt.Sprintf("bee-hook: edit allowed unchecked: no decision within %s", cfg.Timeout)}
			}
			return GuardResult{Line: fmt.Sprintf("bee-hook: edit allowed unchecked: %v", cause)}
		},
		func(p any) GuardResult {
			return GuardResult{Line: fmt.Sprintf("bee-hook: edit allowed unchecked: internal error: %v", p)}
		})
	res.Deny = flatten(res.Deny) // its parts are cut already; its advice must not be
	res.Line = oneLine(res.Line)
	return res
}

func guard(ctx context.Context, cfg GuardConfig, stdin io.Reader) GuardResult {
	unchecked := func(format string, args ...any) GuardResult {
		return GuardResult{Line: "bee-hook: edit allowed unchecked: " + fmt.Sprintf(format, args...)}
	}
	var in GuardInput
	if err := readJSONInput(stdin, cfg.MaxInput, &in); err != nil {
		return unchecked("cannot read the PreToolUse input: %v", err)
	}
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return unchecked("ignoring a %s input; --guard is a PreToolUse hook (matcher %q)", textcut.Bytes(in.HookEventName, 64), GuardMatcher)
	}
	p := in.ToolInput.FilePath
	if p == "" {
		p = in.ToolInput.NotebookPath
	}
	if p == "" {
		return unchecked("the %s input names no file_path or notebook_path", textcut.Bytes(in.ToolName, 64))
	}
	abs, cwd, err := absPath(p, in.Cwd, cfg.Getwd)
	if err != nil {
		return unchecked("%v", err)
	}

	e, err := cfg.Bridge.find(ctx)
	switch {
	case errors.Is(err, errNoClaude):
		return GuardResult{} // not a Claude Code session: nothing to guard, nothing to say
	case err != nil:
		return unchecked("%v", err)
	}
	req := wire.CheckPathsRequest{Paths: []string{abs}, Tool: in.ToolName, Cwd: cwd}
	if (wire.CheckPathsRequest{Paths: req.Paths, Tool: req.Tool}).Validate() != nil {
		req.Tool = "" // informational only: an odd name must not cost the check
	}
	a, err := cfg.CheckPaths(ctx, e.Port, e.Token, req)
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)):
		// The words of Guard's own bound, which may come first.
		return unchecked("no decision within %s", cfg.Timeout)
	case err != nil:
		if se, ok := errors.AsType[*wire.StatusError](err); ok && se.Code == 404 {
			return unchecked("the bridge (pid %d) does not serve /check-paths: it runs an older bee; restart the session after updating", e.PID)
		}
		return unchecked("%s", scrub(err.Error(), e.Token))
	case a.Allow:
		return GuardResult{}
	}
	return GuardResult{Deny: scrub(DenyReason(a, cwd, cfg.Now()), e.Token)}
}

// absPath returns p as an absolute, clean path (a relative one is taken
// from cwd, else from getwd), and the directory it was taken from ("" when
// p was absolute and cwd is not).
func absPath(p, cwd string, getwd func() (string, error)) (abs, base string, err error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", errors.New("the file path holds a NUL byte")
	}
	if filepath.IsAbs(cwd) {
		base = filepath.Clean(cwd)
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), base, nil
	}
	if base == "" {
		wd, err := getwd()
		if err != nil {
			return "", "", fmt.Errorf("the file path %q is relative and the input has no cwd: %w", p, err)
		}
		base = filepath.Clean(wd)
	}
	return filepath.Join(base, p), base, nil
}

// DenyOutput is what the guard prints on stdout to deny a tool call: Claude
// Code's PreToolUse decision, one JSON object on one line.
func DenyOutput(reason string) []byte {
	type specific struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		HookSpecificOutput specific `json:"hookSpecificOutput"`
	}{specific{"PreToolUse", "deny", reason}}); err != nil {
		panic(err) // a struct of strings always encodes
	}
	return b.Bytes()
}

// maxDescribed is how many conflicts a denial describes; it counts the
// rest.
const maxDescribed = 3

// DenyReason is the one line that tells the model why its edit is refused:
// each conflict's path (relative to cwd when it is inside it), its holder,
// the action and reason it holds it for, its pattern and age (the first
// three; the rest are counted); then what to do. a must deny (at least
// one conflict).
func DenyReason(a wire.CheckPathsAnswer, cwd string, now time.Time) string {
	var b strings.Builder
	b.WriteString("bee: ")
	b.WriteString(describeConflicts(a, cwd, now))
	b.WriteString(". Leave ")
	if len(a.Conflicts) == 1 && a.More == 0 {
		b.WriteString("it")
	} else {
		b.WriteString("them")
	}
	b.WriteString(" alone for now: take other work, or post to the holder (bee_post_action to ")
	b.WriteString(shown(a.Conflicts[0].Holder, 80))
	b.WriteString(") to ask for it and wait for the answer; the reservation ends when its holder releases it, finishes its action or leaves.")
	return b.String()
}

// describeConflicts describes the first maxDescribed conflicts of a and
// counts the rest.
func describeConflicts(a wire.CheckPathsAnswer, cwd string, now time.Time) string {
	var parts []string
	for _, c := range a.Conflicts[:min(len(a.Conflicts), maxDescribed)] {
		parts = append(parts, describeConflict(c, cwd, now))
	}
	s := strings.Join(parts, "; ")
	if more := a.More + len(a.Conflicts) - len(parts); more > 0 {
		s += fmt.Sprintf("; and %d more", more)
	}
	return s
}

// describeConflict says who holds c's path, for what, since when.
func describeConflict(c wire.PathConflict, cwd string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is reserved by %s", shown(displayPath(c.Path, cwd), 300), shown(c.Holder, 80))
	if c.Action != "" {
		fmt.Fprintf(&b, " for %s", shown(c.Action, 40))
	}
	var details []string
	if c.Reason != "" {
		details = append(details, `"`+shown(c.Reason, maxReasonBytes)+`"`)
	}
	if c.Pattern != "" {
		details = append(details, "pattern "+shown(c.Pattern, 200))
	}
	if c.Exclusive {
		details = append(details, "exclusive")
	} else {
		details = append(details, "shared")
	}
	if !c.Since.IsZero() {
		details = append(details, "for "+age(now.Sub(c.Since)))
	}
	fmt.Fprintf(&b, " (%s)", strings.Join(details, ", "))
	return b.String()
}

// displayPath is p relative to cwd when it is inside it, else p.
func displayPath(p, cwd string) string {
	if cwd == "" {
		return p
	}
	rel, err := filepath.Rel(cwd, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

// shown makes text another agent wrote fit a denial: inert, one line, at
// most n bytes.
func shown(s string, n int) string {
	return textcut.Bytes(termtext.Line(s), n)
}

// flatten makes s one line of valid UTF-8, control characters (newlines
// among them) as spaces, without cutting it.
func flatten(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// age says how long ago in a word: "40s", "12m", "3h", "2d".
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
