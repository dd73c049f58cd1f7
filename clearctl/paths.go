package clearctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/tractat-us/bee/internal/logkey"
)

const checkPathsPath = "/check-paths"

// Bounds of POST /check-paths.
const (
	// DefaultCheckWithin is how long the Server waits for a PathChecker
	// before it answers 503 "no decision", when Options.CheckWithin is zero.
	// Well under a second: the edit guard allows whatever the bridge has
	// not decided within its own bound of a second, and says so.
	DefaultCheckWithin = 500 * time.Millisecond

	// DefaultCheckClientTimeout bounds CheckPaths when its ctx has no
	// deadline. It is longer than DefaultCheckWithin, so the bridge's own
	// "no decision" arrives before the client gives up.
	DefaultCheckClientTimeout = time.Second

	// MaxCheckPaths is the most paths one POST /check-paths may carry. The
	// client, CheckPaths, sends more in as many requests as they need.
	MaxCheckPaths = 1000

	// MaxPathBytes bounds one path in a request, as Linux's PATH_MAX does.
	MaxPathBytes = 4096

	// MaxToolBytes bounds CheckPathsRequest.Tool.
	MaxToolBytes = 64

	// MaxConflicts is the most conflicts one answer carries; the Server
	// cuts a longer list there and counts the rest in More.
	MaxConflicts = 16
)

// ToolGitCommit is CheckPathsRequest.Tool for the paths a git commit
// changes (bee-hook --pre-commit). Any other Tool is the name of the Claude
// Code tool about to write (Write, Edit, MultiEdit, NotebookEdit).
const ToolGitCommit = "git-commit"

// CheckPathsRequest is the body of POST /check-paths: the files a tool is
// about to write, so the bridge can say whether another live identity holds
// any of them.
type CheckPathsRequest struct {
	// Paths are the files that would be written (or, for a commit,
	// changed, deleted and renamed files alike): absolute and clean
	// (filepath.Clean leaves them as they are), but not resolved through
	// symbolic links, since judging where a write lands is the bridge's
	// business (repo.Rel). 1 to MaxCheckPaths of them, each at most
	// MaxPathBytes of valid UTF-8 without NUL.
	Paths []string `json:"paths"`
	// Tool is what would write them: the Claude Code tool's name, or
	// ToolGitCommit. At most MaxToolBytes of printable ASCII; "" when not
	// known.
	Tool string `json:"tool,omitempty"`
	// Cwd is the caller's working directory (the session's, from the hook
	// input; the worktree's top for a commit): absolute and clean, or "".
	Cwd string `json:"cwd,omitempty"`
}

// Validate reports why req cannot be checked: an error naming the field.
// The bridge answers such a request 400; CheckPaths sends none.
func (req CheckPathsRequest) Validate() error {
	if len(req.Paths) == 0 {
		return errors.New("paths is empty: name at least one file")
	}
	if len(req.Paths) > MaxCheckPaths {
		return fmt.Errorf("paths holds %d paths, more than %d", len(req.Paths), MaxCheckPaths)
	}
	for i, p := range req.Paths {
		if err := checkAbsPath(p); err != nil {
			return fmt.Errorf("paths[%d]: %w", i, err)
		}
	}
	if req.Cwd != "" {
		if err := checkAbsPath(req.Cwd); err != nil {
			return fmt.Errorf("cwd: %w", err)
		}
	}
	if len(req.Tool) > MaxToolBytes {
		return fmt.Errorf("tool is %d bytes, more than %d", len(req.Tool), MaxToolBytes)
	}
	for i := 0; i < len(req.Tool); i++ {
		if c := req.Tool[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("tool holds %q at byte %d: only printable ASCII is allowed", c, i)
		}
	}
	return nil
}

// checkAbsPath reports why p is not an absolute, clean path of at most
// MaxPathBytes of UTF-8 without NUL.
func checkAbsPath(p string) error {
	switch {
	case len(p) > MaxPathBytes:
		return fmt.Errorf("%d bytes, more than %d", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return errors.New("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("holds a NUL byte")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is not absolute", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not clean (%q)", p, filepath.Clean(p))
	}
	return nil
}

// CheckPathsAnswer is the body of a 200 answer to POST /check-paths.
type CheckPathsAnswer struct {
	// Allow is true when no other live identity holds any of the paths:
	// the tool may write them. Conflicts is then empty.
	Allow bool `json:"allow"`
	// Conflicts, when Allow is false, are the reservations that stop it:
	// at least one, at most MaxConflicts.
	Conflicts []PathConflict `json:"conflicts,omitempty"`
	// More counts the conflicts left out of Conflicts.
	More int `json:"more,omitempty"`
}

// A PathConflict is one reservation of another live identity that holds a
// path the tool would write.
type PathConflict struct {
	// Path is the path asked about, as it was in the request.
	Path string `json:"path"`
	// Repo is the name of the repository the path belongs to (see package
	// repo), "" when not known.
	Repo string `json:"repo,omitempty"`
	// Holder is the identity that holds it: agent:<name>#<8 hex>, or a
	// person's user:<name>.
	Holder string `json:"holder"`
	// Pattern is the holder's path pattern that covers Path, relative to
	// the repository's root.
	Pattern string `json:"pattern,omitempty"`
	// Exclusive tells an exclusive reservation from a shared one.
	Exclusive bool `json:"exclusive"`
	// Reason is why the holder reserved it, in its own words.
	Reason string `json:"reason,omitempty"`
	// Action is the id of the action the reservation serves, "" for none.
	Action string `json:"action,omitempty"`
	// Since is when the reservation was granted; zero when not known.
	Since time.Time `json:"since,omitzero"`
}

// Validate reports why a is not an answer a bridge may give: an Allow with
// conflicts, a refusal with none, a negative More, or a conflict that does
// not name its path and holder.
func (a CheckPathsAnswer) Validate() error {
	switch {
	case a.Allow && (len(a.Conflicts) > 0 || a.More > 0):
		return errors.New("it allows and names conflicts")
	case !a.Allow && len(a.Conflicts) == 0:
		return errors.New("it refuses without naming a conflict")
	case a.More < 0:
		return fmt.Errorf("more is %d", a.More)
	}
	for i, c := range a.Conflicts {
		if c.Path == "" || c.Holder == "" {
			return fmt.Errorf("conflicts[%d] does not name its path and holder", i)
		}
	}
	return nil
}

// A PathChecker decides whether the paths a tool is about to write are held
// by another live identity. bee's bridge implements it over its board.
//
// CheckPaths answers Allow true when none is, or Allow false with the
// reservations that hold them (at least one). It answers for the bridge's
// current identity: that identity's own reservations never stop it. It
// returns an error only when it cannot decide (the board cannot be read);
// the Server answers that 500 and the hook then allows, saying so.
//
// ctx ends when the Server's bound (Options.CheckWithin) passes, the caller
// hangs up, or Server.Close is called (cause ErrClosed); CheckPaths should
// return promptly then, since Close waits for it. The Server may call it
// concurrently, and concurrently with a Retirer's Retire.
type PathChecker interface {
	CheckPaths(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error)
}

// PathCheckerFunc adapts a function to a PathChecker.
type PathCheckerFunc func(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error)

// CheckPaths calls f(ctx, req).
func (f PathCheckerFunc) CheckPaths(ctx context.Context, req CheckPathsRequest) (CheckPathsAnswer, error) {
	return f(ctx, req)
}

var _ PathChecker = PathCheckerFunc(nil)

type checkResult struct {
	answer CheckPathsAnswer
	err    error
}

// handleCheckPaths serves POST /check-paths: it asks the PathChecker, on a
// context that ends after CheckWithin, when the caller hangs up or when
// Close is called, and answers 200 with its answer, 500 when it failed,
// and 503 when it did not decide in time or the bridge is closing.
func (s *Server) handleCheckPaths(w http.ResponseWriter, r *http.Request) {
	var req CheckPathsRequest
	if !s.admit(w, r, &req) {
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	defer stop()
	ctx, cancelT := context.WithTimeout(ctx, s.checkWithin)
	defer cancelT()

	done, ok := s.startCheck(ctx, req)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		return
	}
	select {
	case res := <-done:
		switch {
		case res.err != nil:
			s.logger.Warn("check paths failed", logkey.Tool, req.Tool, logkey.Err, res.err)
			writeJSON(w, http.StatusInternalServerError, errorBody{Error: res.err.Error()})
		default:
			writeJSON(w, http.StatusOK, res.answer)
		}
	case <-ctx.Done():
		// The PathChecker has not returned: it may ignore ctx, so do not
		// wait for it (Close does).
		switch {
		case s.ctx.Err() != nil:
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "bridge closing"})
		default:
			s.logger.Warn("check paths undecided", logkey.Tool, req.Tool, logkey.Within, s.checkWithin)
			writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: fmt.Sprintf("the bridge did not decide within %s", s.checkWithin)})
		}
	}
}

// startCheck runs the PathChecker in a goroutine Close waits for, and
// returns the channel its one result arrives on. It returns false once
// Close has been called.
func (s *Server) startCheck(ctx context.Context, req CheckPathsRequest) (<-chan checkResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	done := make(chan checkResult, 1) // buffered: the handler may have answered and gone
	s.checks.Go(func() { done <- s.check(ctx, req) })
	return done, true
}

// check calls the PathChecker, turning a panic into an error rather than
// taking the bridge down, and an answer that breaks CheckPathsAnswer's
// rules into an error; a list of conflicts longer than MaxConflicts is cut
// there, counted in More.
func (s *Server) check(ctx context.Context, req CheckPathsRequest) (res checkResult) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("check paths panicked", logkey.Panic, fmt.Sprint(p), logkey.Stack, string(debug.Stack()))
			res = checkResult{err: fmt.Errorf("check paths panicked: %v", p)}
		}
	}()
	a, err := s.checker.CheckPaths(ctx, req)
	if err != nil {
		return checkResult{err: err}
	}
	if n := len(a.Conflicts); n > MaxConflicts {
		a.Conflicts, a.More = a.Conflicts[:MaxConflicts:MaxConflicts], a.More+n-MaxConflicts
	}
	if err := a.Validate(); err != nil {
		return checkResult{err: fmt.Errorf("the bridge's path checker gave a bad answer: %w", err)}
	}
	return checkResult{answer: a}
}

// CheckPaths asks the bridge listening on 127.0.0.1:port, authenticating
// with token, whether another live identity holds any of req.Paths, and
// returns its answer.
//
// More paths than one request carries (MaxCheckPaths, or the body limit)
// go in as many requests as they need, one after another with req's Tool
// and Cwd; the answer allows only when every one of them does, and holds
// the conflicts of all, cut at MaxConflicts and counted in More beyond.
// Every request goes over its own connection, with the token in the
// Authorization header only, as with Retire.
//
// If ctx has no deadline, the call is bounded by DefaultCheckClientTimeout.
//
// Errors:
//   - req fails Validate (but for holding more than MaxCheckPaths paths): an
//     error, and no request;
//   - nothing listening on the port: an error wrapping ErrNotListening;
//   - any answer but 200: a *StatusError (404: a bridge too old to serve
//     the route; 401: wrong token; 500: the bridge could not decide; 503:
//     it did not decide in time, or is busy or closing);
//   - a 200 whose body is not a CheckPathsAnswer that passes Validate: an
//     error wrapping ErrNotABridge;
//   - ctx ending first: an error wrapping ctx's error;
//   - port outside 1..65535 or an empty token: an error, and no request.
func CheckPaths(ctx context.Context, port int, token string, req CheckPathsRequest) (CheckPathsAnswer, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCheckClientTimeout)
		defer cancel()
	}
	batches, err := batchPaths(req)
	if err != nil {
		return CheckPathsAnswer{}, err
	}
	out := CheckPathsAnswer{Allow: true}
	for _, b := range batches {
		a, err := checkPaths(ctx, port, token, b)
		if err != nil {
			return CheckPathsAnswer{}, err
		}
		if a.Allow {
			continue
		}
		out.Allow = false
		room := MaxConflicts - len(out.Conflicts)
		kept := a.Conflicts[:min(room, len(a.Conflicts))]
		out.Conflicts = append(out.Conflicts, kept...)
		out.More += a.More + len(a.Conflicts) - len(kept)
	}
	return out, nil
}

// batchPaths checks req and splits its paths into requests that each fit
// MaxCheckPaths and the body limit.
func batchPaths(req CheckPathsRequest) ([]CheckPathsRequest, error) {
	whole := req
	whole.Paths = req.Paths[:min(len(req.Paths), MaxCheckPaths)]
	if err := whole.Validate(); err != nil {
		return nil, fmt.Errorf("check paths: %w", err)
	}
	for i, p := range req.Paths[len(whole.Paths):] {
		if err := checkAbsPath(p); err != nil {
			return nil, fmt.Errorf("check paths: paths[%d]: %w", len(whole.Paths)+i, err)
		}
	}
	// The body's room for paths: the limit, less the rest of the request
	// (with room to spare for the JSON around it).
	rest, err := json.Marshal(CheckPathsRequest{Tool: req.Tool, Cwd: req.Cwd})
	if err != nil {
		return nil, fmt.Errorf("check paths: encode request: %w", err)
	}
	room := MaxBodyBytes - len(rest) - 64
	var batches []CheckPathsRequest
	cur := CheckPathsRequest{Tool: req.Tool, Cwd: req.Cwd}
	size := 0
	for _, p := range req.Paths {
		enc, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("check paths: encode path: %w", err)
		}
		n := len(enc) + 1 // and its comma
		if len(cur.Paths) > 0 && (len(cur.Paths) == MaxCheckPaths || size+n > room) {
			batches = append(batches, cur)
			cur = CheckPathsRequest{Tool: req.Tool, Cwd: req.Cwd}
			size = 0
		}
		cur.Paths = append(cur.Paths, p)
		size += n
	}
	return append(batches, cur), nil
}

// checkPaths posts one request that fits.
func checkPaths(ctx context.Context, port int, token string, req CheckPathsRequest) (CheckPathsAnswer, error) {
	var none CheckPathsAnswer
	hreq, addr, err := newPost(ctx, "check paths", port, token, checkPathsPath, req)
	if err != nil {
		return none, err
	}
	resp, err := newClient().Do(hreq)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return none, fmt.Errorf("check paths: no answer from the bridge on %s: %w", addr, ctx.Err())
		case errors.Is(err, syscall.ECONNREFUSED):
			return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
		}
		return none, fmt.Errorf("check paths: post to bridge on %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		if ctx.Err() != nil {
			return none, fmt.Errorf("check paths: no answer from the bridge on %s: %w", addr, ctx.Err())
		}
		return none, fmt.Errorf("check paths: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return none, &StatusError{Code: resp.StatusCode, Body: errorText(data), Op: "check paths"}
	}
	var shape struct {
		Allow *bool `json:"allow"`
		CheckPathsAnswer
	}
	if err := json.Unmarshal(data, &shape); err != nil {
		return none, fmt.Errorf("check paths: %w: %w", ErrNotABridge, err)
	}
	if shape.Allow == nil {
		return none, fmt.Errorf("check paths: %w: no \"allow\" in %s", ErrNotABridge, errorText(data))
	}
	out := shape.CheckPathsAnswer
	out.Allow = *shape.Allow
	if err := out.Validate(); err != nil {
		return none, fmt.Errorf("check paths: %w: %w", ErrNotABridge, err)
	}
	return out, nil
}
