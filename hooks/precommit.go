package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tractat-us/bee/clearctl/wire"
)

// DefaultPreCommitTimeout bounds a whole PreCommit when
// PreCommitConfig.Timeout is zero. A commit may stage thousands of paths,
// and a person waits for it at a terminal: long enough for both, short
// enough that bee never holds a commit up for long. Past it, the commit
// goes ahead, and says so.
const DefaultPreCommitTimeout = 30 * time.Second

// ExitRefuse is bee-hook --pre-commit's exit status when it refuses the
// commit; git then does not commit.
const ExitRefuse = 1

// beeCheckArgs are the arguments PreCommit runs bee with when no bee
// session is above the commit (a person's commit, or an agent session
// without bee): `bee reservations check --json`, which reads one
// wire.CheckPathsRequest as JSON on stdin, decides as the person
// running it (user:$USER: that person's own reservations never stop it),
// and prints one wire.CheckPathsAnswer as JSON on stdout with exit
// status 0. Any other outcome (a bee without that command, no board, a
// non-zero exit) is an error, and the commit goes ahead with a warning.
var beeCheckArgs = []string{"reservations", "check", "--json"}

// PreCommitConfig configures PreCommit. The zero value is what bee-hook
// uses in real life.
type PreCommitConfig struct {
	// Bridge finds the bridge of the session the commit runs in.
	Bridge Bridge
	// Timeout bounds the whole PreCommit. 0 means DefaultPreCommitTimeout.
	Timeout time.Duration
	// CheckPaths asks the bridge. nil means wire.CheckPaths.
	CheckPaths func(ctx context.Context, port int, token string, req wire.CheckPathsRequest) (wire.CheckPathsAnswer, error)
	// Git runs git with args in the working directory and returns its
	// stdout. nil means the git on PATH, with the environment git gave the
	// hook (GIT_INDEX_FILE among it).
	Git func(ctx context.Context, args ...string) ([]byte, error)
	// AskBee asks bee when no bee session is above the commit. nil means
	// running bee (beside this executable, else on PATH) with beeCheckArgs.
	AskBee func(ctx context.Context, req wire.CheckPathsRequest) (wire.CheckPathsAnswer, error)
	// Now is the time reservations' ages are counted to. nil means
	// time.Now.
	Now func() time.Time
}

// A PreCommitResult is how the pre-commit hook ends: Refuse true (exit
// ExitRefuse) when the commit changes a path another live identity holds
// exclusively, and Text (lines, or "") for stderr.
type PreCommitResult struct {
	Refuse bool
	Text   string
}

// PreCommit is bee-hook --pre-commit, git's pre-commit hook: it refuses a
// commit that changes (adds, modifies, deletes, or renames from or to) a
// path another live identity holds exclusively, naming the path, the
// holder and its reason. Shell commands bypass the edit guard; this is the
// guard at the commit.
//
// It reads the staged paths from git (git diff --cached, renames as a
// deletion and an addition) and asks, about their absolute paths:
//
//   - under a bee session (a claude process above the commit, with a live
//     bridge), that session's bridge, over POST /check-paths, as the edit
//     guard does: the session's own reservations never stop its commits;
//   - otherwise (a person's commit, or a session without bee), bee itself
//     as the person running it: `bee reservations check --json`, which
//     reads one wire.CheckPathsRequest as JSON on stdin, decides as that
//     person (whose own reservations never stop them) and prints one
//     wire.CheckPathsAnswer as JSON on stdout, exiting 0.
//
// It refuses only on a conflict with an exclusive reservation. Every
// error (git fails, no bee to ask, a bridge too old to serve
// /check-paths, no answer within Timeout) lets the commit go ahead with a
// one-line warning in Text: bee never blocks a commit because it is down
// or confused. It always returns within Timeout, and never holds the
// token in Text.
func PreCommit(ctx context.Context, cfg PreCommitConfig) PreCommitResult {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultPreCommitTimeout
	}
	if cfg.CheckPaths == nil {
		cfg.CheckPaths = wire.CheckPaths
	}
	if cfg.Git == nil {
		cfg.Git = runGit
	}
	if cfg.AskBee == nil {
		cfg.AskBee = askBee
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return bounded(ctx, cfg.Timeout,
		func(ctx context.Context) PreCommitResult { return preCommit(ctx, cfg) },
		func(cause error) PreCommitResult { return lateFor(cause, cfg.Timeout) },
		func(p any) PreCommitResult { return unchecked("internal error: %v", p) })
}

// late says the commit went unchecked because ctx ended: its timeout
// passed, or it was cancelled.
func late(ctx context.Context, timeout time.Duration) PreCommitResult {
	cause := context.Cause(ctx)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cause = context.DeadlineExceeded
	}
	return lateFor(cause, timeout)
}

func lateFor(cause error, timeout time.Duration) PreCommitResult {
	if errors.Is(cause, context.DeadlineExceeded) {
		return unchecked("no decision within %s", timeout)
	}
	return unchecked("%v", cause)
}

// unchecked lets the commit go ahead, saying why it was not checked.
func unchecked(format string, args ...any) PreCommitResult {
	return PreCommitResult{Text: oneLine("bee-hook: commit not checked against reservations: " + fmt.Sprintf(format, args...))}
}

func preCommit(ctx context.Context, cfg PreCommitConfig) PreCommitResult {
	out, err := cfg.Git(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return unchecked("%v", err)
	}
	top := strings.TrimSuffix(string(out), "\n")
	if !filepath.IsAbs(top) {
		return unchecked("git rev-parse --show-toplevel said %q, not an absolute directory", top)
	}
	top = filepath.Clean(top)
	out, err = cfg.Git(ctx, "diff", "--cached", "--name-only", "-z", "--no-renames")
	if err != nil {
		return unchecked("%v", err)
	}
	var paths []string
	for name := range strings.SplitSeq(string(out), "\x00") {
		if name == "" {
			continue
		}
		// A path that is not UTF-8 cannot be sent as it is: U+FFFD stands
		// for its odd bytes, which patterns of its directories still match.
		paths = append(paths, filepath.Join(top, strings.ToValidUTF8(name, "\uFFFD")))
	}
	if len(paths) == 0 {
		return PreCommitResult{} // nothing staged (--allow-empty): nothing to hold
	}
	req := wire.CheckPathsRequest{Paths: paths, Tool: wire.ToolGitCommit, Cwd: top}

	var a wire.CheckPathsAnswer
	e, err := cfg.Bridge.find(ctx)
	switch {
	case errors.Is(err, errNoClaude) || errors.Is(err, errNoBridge):
		a, err = cfg.AskBee(ctx, req)
		switch {
		case err != nil && ctx.Err() != nil:
			return late(ctx, cfg.Timeout) // in PreCommit's own words, which may come first
		case err != nil:
			return unchecked("no bee session above this commit, and bee could not tell: %v", err)
		}
	case err != nil:
		return unchecked("%v", err)
	default:
		a, err = cfg.CheckPaths(ctx, e.Port, e.Token, req)
		if se, ok := errors.AsType[*wire.StatusError](err); ok && se.Code == 404 {
			return unchecked("the bridge (pid %d) does not serve /check-paths: it runs an older bee", e.PID)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return late(ctx, cfg.Timeout)
		case err != nil:
			return unchecked("%s", scrub(err.Error(), e.Token))
		}
	}
	return judgeCommit(a, top, cfg.Now())
}

// judgeCommit refuses the commit when a names a conflict with an
// exclusive reservation; shared ones do not stop a commit.
func judgeCommit(a wire.CheckPathsAnswer, top string, now time.Time) PreCommitResult {
	held := wire.CheckPathsAnswer{More: a.More}
	for _, c := range a.Conflicts {
		if c.Exclusive {
			held.Conflicts = append(held.Conflicts, c)
		}
	}
	if a.Allow || len(held.Conflicts) == 0 {
		return PreCommitResult{}
	}
	// held.More counts the conflicts the answer left out, exclusive or
	// not: "and N more" may count shared ones too.
	var b strings.Builder
	b.WriteString("bee: commit refused: ")
	b.WriteString(describeConflicts(held, top, now))
	b.WriteString(".\n")
	holder := shown(held.Conflicts[0].Holder, 80)
	fmt.Fprintf(&b, "bee: another live identity holds %s exclusively. Unstage %s (git restore --staged PATH) and commit the rest, or wait until %s released; to ask for %s, post to the holder (bee_post_action to %s, or bee post --to %s).\n",
		plural(held, "this path", "these paths"), plural(held, "it", "them"), plural(held, "it is", "they are"), plural(held, "it", "them"), holder, holder)
	return PreCommitResult{Refuse: true, Text: b.String()}
}

// plural picks one or many by how many conflicts a names.
func plural(a wire.CheckPathsAnswer, one, many string) string {
	if len(a.Conflicts) == 1 && a.More == 0 {
		return one
	}
	return many
}

// runGit runs git with args in the working directory, with the
// environment git gave the hook.
func runGit(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	return out, nil
}

// maxBeeAnswer bounds what askBee reads of bee's answer.
const maxBeeAnswer = 1 << 20

// askBee runs bee with beeCheckArgs, req on its stdin, and returns the
// answer it prints.
func askBee(ctx context.Context, req wire.CheckPathsRequest) (wire.CheckPathsAnswer, error) {
	var none wire.CheckPathsAnswer
	bee, err := findBee()
	if err != nil {
		return none, err
	}
	data, err := json.Marshal(req)
	if err != nil {
		return none, fmt.Errorf("encode request: %w", err)
	}
	cmd := exec.CommandContext(ctx, bee, beeCheckArgs...)
	cmd.Env = withoutVars(os.Environ(), gitHookVars)
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	name := bee + " " + strings.Join(beeCheckArgs, " ")
	if err := cmd.Run(); err != nil {
		return none, fmt.Errorf("%s: %w: %s", name, err, firstLine(stderr.String()))
	}
	if stdout.Len() > maxBeeAnswer {
		return none, fmt.Errorf("%s: an answer of %d bytes, more than %d", name, stdout.Len(), maxBeeAnswer)
	}
	var shape struct {
		Allow *bool `json:"allow"`
		wire.CheckPathsAnswer
	}
	if err := json.Unmarshal(stdout.Bytes(), &shape); err != nil || shape.Allow == nil {
		return none, fmt.Errorf("%s: the answer is not a reservations check's: %s", name, firstLine(stdout.String()))
	}
	a := shape.CheckPathsAnswer
	a.Allow = *shape.Allow
	if err := a.Validate(); err != nil {
		return none, fmt.Errorf("%s: the answer is not a reservations check's: %w", name, err)
	}
	return a, nil
}

// gitHookVars are the variables git sets for a hook about the commit's
// own repository. bee finds the repository of each file from the file
// itself, running git where it must; under GIT_DIR without GIT_WORK_TREE
// git takes whatever directory it is asked about for the top of the
// worktree, so bee would place every file wrongly and hold none. askBee
// runs bee without them.
var gitHookVars = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_PREFIX",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"}

// withoutVars is env without the variables named in names.
func withoutVars(env, names []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

// findBee returns the bee command beside this executable (go install puts
// bee and bee-hook in one folder), else the one on PATH.
func findBee() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "bee")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("bee")
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return "", errors.New("no bee beside bee-hook or on PATH; install it with: go install github.com/tractat-us/bee/cmd/bee@latest")
		}
		return "", err
	}
	return p, nil
}

// firstLine is the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
