package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of POST /check-paths.
const (
	// DefaultCheckClientTimeout bounds CheckPaths when its ctx has no
	// deadline. It is longer than the bridge's own bound on a check
	// (clearctl's DefaultCheckWithin, 500 ms), so the bridge's "no decision"
	// arrives before the client gives up.
	DefaultCheckClientTimeout = time.Second

	// MaxCheckPaths is the most paths one POST /check-paths may carry. The
	// client, CheckPaths, sends more in as many requests as they need.
	MaxCheckPaths = 1000

	// MaxPathBytes bounds one path in a request, as Linux's PATH_MAX does.
	MaxPathBytes = 4096

	// MaxToolBytes bounds CheckPathsRequest.Tool.
	MaxToolBytes = 64

	// MaxConflicts is the most conflicts one answer carries; a bridge cuts
	// a longer list there and counts the rest in More.
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
	if err := checkTarget("check paths", port, token); err != nil {
		return CheckPathsAnswer{}, err
	}
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
	a, addr, err := post(ctx, port, token, CheckPathsPath, req)
	switch {
	case err != nil && ctx.Err() != nil:
		return none, fmt.Errorf("check paths: no answer from the bridge on %s: %w", addr, ctx.Err())
	case errors.Is(err, errRefused):
		return none, fmt.Errorf("%w on %s: %w", ErrNotListening, addr, err)
	case errors.Is(err, ErrNotABridge):
		return none, fmt.Errorf("check paths: %w", err)
	case err != nil:
		return none, fmt.Errorf("check paths: post to bridge on %s: %w", addr, err)
	case a.code != 200:
		return none, &StatusError{Code: a.code, Body: errorText(a.body), Op: "check paths"}
	}
	var shape struct {
		Allow *bool `json:"allow"`
		CheckPathsAnswer
	}
	if err := json.Unmarshal(a.body, &shape); err != nil {
		return none, fmt.Errorf("check paths: %w: %w", ErrNotABridge, err)
	}
	if shape.Allow == nil {
		return none, fmt.Errorf("check paths: %w: no \"allow\" in %s", ErrNotABridge, errorText(a.body))
	}
	out := shape.CheckPathsAnswer
	out.Allow = *shape.Allow
	if err := out.Validate(); err != nil {
		return none, fmt.Errorf("check paths: %w: %w", ErrNotABridge, err)
	}
	return out, nil
}
