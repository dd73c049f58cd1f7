package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/pathglob"
	"github.com/tractat-us/bee/internal/logkey"
)

// The reservation tools: a session reserves the paths of its repository
// it is about to change, releases them when done, and lists who holds
// what. What they teach the model is the habit the edit guard enforces:
// reserve first, release when done, and when an edit is refused, take
// other work or ask the holder, never work around it.

// Tool names of reservations.
const (
	ToolReserve          = "bee_reserve_paths"
	ToolReleasePaths     = "bee_release_paths"
	ToolListReservations = "bee_list_reservations"
)

// patternRule says what a path pattern is, for descriptions.
const patternRule = "patterns relative to the repository's root, '/'-separated: * matches within one segment, ** across segments, " +
	"and a pattern covers everything below what it names (src/auth is the folder and all in it)"

// reservationTools are the table entries of the reservation tools.
func reservationTools() []toolDef {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	return []toolDef{
		define(&mcp.Tool{Name: ToolReserve, Title: "Reserve paths before you change them", Description: "Reserve files of this session's repository before you change them, " +
			"so that no other agent edits them meanwhile: paths are " + patternRule + `, such as ["src/auth/**", "docs/auth.md"]. ` +
			"Reserve what you are about to change, no more, and release it with " + ToolReleasePaths + " as soon as you are done. " +
			"Exclusive unless exclusive is false (shared: others may share the paths, none may hold them exclusively). " +
			"Granted whole or refused whole: a refusal names who holds which paths and why; then take other work, or post the holder an action asking for them. " +
			"While you hold paths, other sessions' edits of them are refused. They are released when you release them, when this session ends or is cleared, " +
			"or, given action (an action you hold), when that action ends. Returns {reservation, next}."}, (*tools).reserve),
		define(&mcp.Tool{Name: ToolReleasePaths, Title: "Release reserved paths", Description: "Release paths you reserved, as soon as you are done changing them, so other agents may. " +
			"paths are patterns as you reserved them, in this session's repository; omit paths to release everything this session holds. Returns {released, next}."}, (*tools).releasePaths),
		define(&mcp.Tool{Name: ToolListReservations, Title: "List reserved paths", Annotations: readOnly, Description: "List who holds which paths of this session's repository now, oldest first: " +
			"each reservation's holder (yours marked), patterns, whether it is exclusive, its reason and the action it serves. " +
			"Look before you plan changes: files another holder reserved exclusively are not yours to edit now. Returns {repo, reservations, next}."}, (*tools).listReservations),
	}
}

// reservationInstructions is what the server's instructions say of
// reservations.
const reservationInstructions = "Before you change files, reserve them with " + ToolReserve + ", and release them with " + ToolReleasePaths + " when done. " +
	"When bee refuses an edit because another agent reserved the file, do not work around it (no shell, no copy): take other work, or post to the holder (" + ToolPost + " to it) asking for the file, and wait for the answer."

// pathPatterns is an argument of 1 to pathglob.MaxPatterns path
// patterns, each one pathglob accepts: a refusal names the pattern and
// says what to write instead.
type pathPatterns []string

func (p *pathPatterns) decodeArg(raw json.RawMessage, _ WaitBounds) string {
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return fmt.Sprintf("must be an array of path pattern strings; got %s", describe(raw))
	}
	if len(ss) == 0 {
		return "must hold at least one path pattern"
	}
	if _, err := pathglob.ParseAll(ss); err != nil {
		return err.Error()
	}
	*p = ss
	return ""
}

func (*pathPatterns) want() string { return "an array of path patterns" }

// optBool is a boolean argument that tells absent from false.
type optBool struct{ given, value bool }

func (b *optBool) decodeArg(raw json.RawMessage, _ WaitBounds) string {
	if err := json.Unmarshal(raw, &b.value); err != nil {
		return "must be true or false; got " + describe(raw)
	}
	b.given = true
	return ""
}

func (*optBool) want() string { return "true or false" }

// or is the value, or dflt when none was given.
func (b optBool) or(dflt bool) bool {
	if !b.given {
		return dflt
	}
	return b.value
}

// reserveIn is bee_reserve_paths' arguments.
type reserveIn struct {
	Paths     pathPatterns `json:"paths" jsonschema:"The paths you are about to change: patterns relative to the repository root, such as src/auth/** or docs/auth.md."`
	Exclusive optBool      `json:"exclusive,omitzero" jsonschema:"false to share the paths with other shared reservations (for files you only read or append to). Default true: nobody else may hold or edit them."`
	Reason    string       `json:"reason" jsonschema:"Why you reserve them, in a few words: agents whose edits are refused read it."`
	Action    string       `json:"action,omitempty" jsonschema:"An action you hold that the paths are for: they are released when it ends."`
}

// reserveOut is bee_reserve_paths' answer.
type reserveOut struct {
	Reservation actions.Reservation `json:"reservation" jsonschema:"The reservation now held."`
	Guidance
}

func (t *tools) reserve(ctx context.Context, c *toolCall, in reserveIn) (reserveOut, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return reserveOut{}, &argError{name: "reason", msg: "must say why you reserve the paths, in a few words: agents whose edits are refused read it"}
	}
	repoName, err := c.s.repoName()
	if err != nil {
		return reserveOut{}, err
	}
	who, _, err := c.s.current()
	if err != nil {
		return reserveOut{}, err
	}
	r, err := c.s.source.Reserve(ctx, actions.Agent(who), actions.ReserveRequest{
		Repo: repoName, Patterns: in.Paths, Shared: !in.Exclusive.or(true), Reason: in.Reason, Action: in.Action,
	})
	if err != nil {
		return reserveOut{}, err
	}
	t.log.Info("paths reserved", logkey.Identity, who, logkey.Reservation, r.ID, logkey.Repo, r.Repo, logkey.Count, len(r.Patterns))
	ends := "you release them, or this session ends or is cleared"
	if r.Action != "" {
		ends = "you release them, " + r.Action + " ends, or this session ends or is cleared"
	}
	next := fmt.Sprintf("Reserved as %s: other sessions' edits of these paths are refused until %s. Make your changes, then call %s as soon as you are done.", r.ID, ends, ToolReleasePaths)
	if !r.Exclusive {
		next = fmt.Sprintf("Reserved as %s, shared: others may share these paths, but nobody may hold them exclusively until %s. Call %s as soon as you are done.", r.ID, ends, ToolReleasePaths)
	}
	return reserveOut{Reservation: r, Guidance: Guidance{Next: next}}, nil
}

// releasePathsIn is bee_release_paths' arguments.
type releasePathsIn struct {
	Paths pathPatterns `json:"paths,omitempty" jsonschema:"The patterns to release, as you reserved them. Omit it to release every path this session holds."`
}

// releasePathsOut is bee_release_paths' answer.
type releasePathsOut struct {
	Released []actions.Reservation `json:"released" jsonschema:"The reservations that lost paths, each with the patterns it lost."`
	Guidance
}

func (t *tools) releasePaths(ctx context.Context, c *toolCall, in releasePathsIn) (releasePathsOut, error) {
	repoName := "" // every repository: all this identity holds
	if len(in.Paths) > 0 {
		var err error
		if repoName, err = c.s.repoName(); err != nil {
			return releasePathsOut{}, err
		}
	}
	who, _, err := c.s.current()
	if err != nil {
		return releasePathsOut{}, err
	}
	rs, err := c.s.source.ReleasePaths(ctx, actions.Agent(who), repoName, in.Paths)
	if err != nil {
		return releasePathsOut{}, err
	}
	if rs == nil {
		rs = []actions.Reservation{}
	}
	t.log.Info("paths released", logkey.Identity, who, logkey.Repo, repoName, logkey.Count, len(rs))
	out := releasePathsOut{Released: rs}
	switch {
	case len(rs) == 0 && len(in.Paths) > 0:
		out.Next = "You held none of these patterns: nothing was released. " + ToolListReservations + " shows what you hold, as you reserved it."
	case len(rs) == 0:
		out.Next = "You held no paths: nothing was released."
	default:
		out.Next = "Released: other sessions may change these paths now."
	}
	return out, nil
}

// listReservationsOut is bee_list_reservations' answer.
type listReservationsOut struct {
	Repo         string              `json:"repo" jsonschema:"The repository: this session's."`
	Reservations []listedReservation `json:"reservations" jsonschema:"The live reservations, oldest first."`
	Guidance
}

// A listedReservation is a reservation as the model sees it: whether it
// is its own.
type listedReservation struct {
	actions.Reservation
	Yours bool `json:"yours,omitempty" jsonschema:"Set on reservations this session holds."`
}

func (t *tools) listReservations(ctx context.Context, c *toolCall, _ struct{}) (listReservationsOut, error) {
	repoName, err := c.s.repoName()
	if err != nil {
		return listReservationsOut{}, err
	}
	who, _, err := c.s.current()
	if err != nil {
		return listReservationsOut{}, err
	}
	rs, err := c.s.source.Reservations(ctx, repoName)
	if err != nil {
		return listReservationsOut{}, err
	}
	out := listReservationsOut{Repo: repoName, Reservations: make([]listedReservation, len(rs))}
	for i, r := range rs {
		out.Reservations[i] = listedReservation{Reservation: r, Yours: r.Holder == string(who)}
	}
	switch {
	case len(rs) == 0:
		out.Next = "Nobody holds paths of this repository now. Reserve what you are about to change with " + ToolReserve + "."
	default:
		out.Next = "Files another holder reserved exclusively are not yours to edit now (the edit is refused): take other work, or post to the holder asking for them. " +
			"Reserve what you are about to change with " + ToolReserve + ", and release it with " + ToolReleasePaths + " when done."
	}
	return out, nil
}

// reservationNext says what to do after a reservation tool, or a post
// with paths, was refused with err; ok is false for errors it does not
// know.
func reservationNext(tool string, err error) (next string, ok bool) {
	switch re, isReserved := errors.AsType[*actions.ReservedError](err); {
	case isReserved && len(re.Conflicts) > 0:
		h := re.Conflicts[0].Holder
		return fmt.Sprintf("Do not change those paths: %s holds them. Take other work (%s), reserve only paths nobody holds, "+
			"or post to the holder (%s with to %q) asking for them and wait for its answer.", h, ToolWait, ToolPost, h), true
	case errors.Is(err, actions.ErrReserved):
		return "Do not change those paths: someone else holds them (" + ToolListReservations + " says who). Take other work, or post to the holder asking for them.", true
	case errors.Is(err, actions.ErrBadPattern):
		return "Call " + tool + " again with the pattern fixed as the error says: " + patternRule + ".", true
	case errors.Is(err, errNoRepo), errors.Is(err, actions.ErrBadRepo):
		return "Tell the user that bee cannot tell which repository this session works in, and why; paths cannot be reserved until that is fixed. Your edits are still checked against others' reservations.", true
	}
	return "", false
}

// postPathsRule is what the post tools say of paths.
const postPathsRule = "paths is optional: the files the work will change, as path patterns of this session's repository; " +
	"whoever takes the action holds them while working on it, and while someone else holds any of them the action waits and nobody is woken for it."

// withPaths sets d's paths, in the session's repository; none leaves d
// as it is.
func (s *Session) withPaths(d *actions.Draft, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	repoName, err := s.repoName()
	if err != nil {
		return err
	}
	d.Repo, d.Paths = repoName, paths
	return nil
}

// heldBackNext says, for a posted action held back by reservations, who
// holds it back: "" for one that is not.
func heldBackNext(rec actions.Record) string {
	if len(rec.HeldBackBy) == 0 {
		return ""
	}
	h := rec.HeldBackBy[0]
	more := ""
	if n := len(rec.HeldBackBy) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("It is held back: %s holds %s (%s)%s, which its paths overlap; nobody takes it until that is released. ", h.Holder, h.Pattern, h.Reservation, more)
}

// viewed is rec, just posted, as views show it: a board fills HeldBackBy
// in its views (Get), not in the answer to a post. An action without
// paths is never held back; one that cannot be read again is shown as
// posted.
func (s *Session) viewed(ctx context.Context, rec actions.Record) actions.Record {
	if len(rec.Paths) == 0 || len(rec.HeldBackBy) > 0 {
		return rec
	}
	if r, err := s.source.Get(ctx, rec.ID); err == nil {
		return r
	}
	return rec
}
