// Package pathglob owns the pattern language of reservations: which paths
// of a repository a pattern names, whether two patterns could name a common
// path, and the literal prefix a board indexes them by. It touches no file
// system and holds no state.
//
// # The language
//
// A pattern is relative to the repository root and '/'-separated. In a
// segment, '*' matches any run of characters other than '/', the empty run
// included; a segment that is exactly "**" matches zero or more whole
// segments. Nothing else is special: '?', '[', '{' and '!' are ordinary
// characters. A pattern also covers everything below what it names, as if
// "/**" were appended: "src/auth" names the directory src/auth, every file
// in it and below it, and a file called src/auth. So "*.go" names the Go
// files at the root (and anything under a directory whose name ends in
// .go), not those in subdirectories; "**/*.go" names them all.
//
// The paths a pattern is matched against are clean: no empty, "." or ".."
// segments (repo.Rel gives such paths). Overlap is decided over clean paths
// too, so its answer is exact.
//
// # Case
//
// Matching is case-sensitive, byte for byte, as git's own paths are and as
// the file systems of Linux (bee's platform) are. On a case-insensitive
// file system (macOS, Windows by default) "src/Auth" and "src/auth" name
// the same files but do not overlap here, so a reservation there guards
// less than it seems to. Folding case would trade that for conflicts
// between files a case-sensitive file system keeps apart; bee runs on
// Linux, so it does not fold.
//
// # Refused patterns
//
// Parse refuses, naming the pattern and saying what to write instead: an
// empty pattern, an absolute one ("/x", "C:\x", "C:/x"), one with ".."
// segments, "." segments other than one leading "./" (which is dropped),
// empty segments (a single trailing '/' is dropped), "**" inside a segment
// ("a**b"), backslashes, NUL and other control characters, invalid UTF-8
// (boards keep patterns as text), and more than MaxPatternLen bytes.
// ParseAll also refuses more than MaxPatterns patterns at once.
package pathglob

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Bounds on what one reservation may name.
const (
	// MaxPatternLen is the most bytes one pattern may have.
	MaxPatternLen = 512
	// MaxPatterns is the most patterns one reservation (or one action's
	// paths) may have.
	MaxPatterns = 64
)

// ErrBadPattern is wrapped by every *Error Parse, Check and ParseAll
// return.
var ErrBadPattern = errors.New("bad path pattern")

// An Error says why a pattern was refused and what to write instead. It
// wraps ErrBadPattern.
type Error struct {
	Pattern string // as given
	Reason  string // what is wrong and what to do
}

func (e *Error) Error() string {
	return fmt.Sprintf("path pattern %q: %s", e.Pattern, e.Reason)
}

// Unwrap returns ErrBadPattern.
func (e *Error) Unwrap() error { return ErrBadPattern }

// A Pattern is a parsed, normalised pattern. The zero Pattern matches
// nothing and overlaps nothing.
type Pattern struct {
	text   string // normalised, as String returns it
	prefix string // leading literal segments, as Prefix returns it
	// segs are the segments of text, with a "**" appended when text does
	// not end in one (the implicit "/**"), so every parsed pattern's last
	// segment is "**".
	segs []segment
}

// A segment is one '/'-separated part of a pattern.
type segment struct {
	text string
	kind segKind
}

type segKind uint8

const (
	literal  segKind = iota // no '*': matches exactly text
	glob                    // has a '*': matches one segment
	globstar                // "**": zero or more segments
)

// Parse checks s and returns it as a Pattern, normalised: one leading "./"
// and one trailing '/' dropped. It returns an *Error (wrapping
// ErrBadPattern) when s is refused; see the package comment for what is.
func Parse(s string) (Pattern, error) {
	if reason := refusedText(s); reason != "" {
		return Pattern{}, &Error{Pattern: s, Reason: reason}
	}
	t := strings.TrimPrefix(s, "./")
	t = strings.TrimSuffix(t, "/")
	if t == "" || t == "." {
		return Pattern{}, &Error{Pattern: s, Reason: fmt.Sprintf("names the repository root; to reserve the whole repository write %q", "**")}
	}
	segs, prefix, reason := segmentsOf(t)
	if reason != "" {
		return Pattern{}, &Error{Pattern: s, Reason: reason}
	}
	if segs[len(segs)-1].kind != globstar {
		segs = append(segs, segment{text: "**", kind: globstar})
	}
	return Pattern{text: t, prefix: t[:prefix], segs: segs}, nil
}

// refusedText says why s is refused as a whole (empty, too long, not
// UTF-8, absolute, a backslash or a control character), or "".
func refusedText(s string) string {
	switch {
	case s == "":
		return fmt.Sprintf("empty; name a path relative to the repository root, like %q", "src/auth/**")
	case len(s) > MaxPatternLen:
		return fmt.Sprintf("%d bytes, more than %d; name a directory higher up instead", len(s), MaxPatternLen)
	case !utf8.ValidString(s):
		return "not valid UTF-8; name the path as text"
	case strings.HasPrefix(s, "/"):
		return fmt.Sprintf("absolute; give it relative to the repository root, like %q", strings.TrimLeft(s, "/"))
	}
	if len(s) >= 2 && s[1] == ':' && isASCIILetter(s[0]) && (len(s) == 2 || s[2] == '/' || s[2] == '\\') {
		return fmt.Sprintf("absolute (Windows drive %q); give it relative to the repository root", s[:2])
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			return fmt.Sprintf("has a backslash at byte %d; separate segments with '/' (backslash is not an escape here)", i)
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("has control character %#04x at byte %d; name the path without it", c, i)
		}
	}
	return ""
}

// segmentsOf splits the normalised pattern t into its segments, and says
// how many bytes of t are its literal prefix, or why a segment is refused.
func segmentsOf(t string) (segs []segment, prefix int, reason string) {
	segs = make([]segment, 0, strings.Count(t, "/")+2)
	prefix = -1 // -1 while still literal
	for i, rest := 0, t; ; i++ {
		part, tail, more := strings.Cut(rest, "/")
		start := len(t) - len(rest)
		switch {
		case part == "":
			return nil, 0, fmt.Sprintf("has an empty segment at byte %d (\"//\"); write one '/' between segments", start)
		case part == ".":
			return nil, 0, fmt.Sprintf("has a \".\" segment at byte %d; drop it", start)
		case part == "..":
			return nil, 0, "has a \"..\" segment, which could reach outside the repository; name the path from the repository root without \"..\""
		case part == "**":
			segs = append(segs, segment{text: part, kind: globstar})
		case strings.Contains(part, "**"):
			return nil, 0, fmt.Sprintf("has \"**\" inside the segment %q; \"**\" must be a whole segment (like %q), and '*' matches within one segment", part, "a/**/b")
		case strings.Contains(part, "*"):
			segs = append(segs, segment{text: part, kind: glob})
		default:
			segs = append(segs, segment{text: part, kind: literal})
		}
		if segs[i].kind != literal && prefix < 0 {
			prefix = max(start-1, 0)
		}
		if !more {
			break
		}
		rest = tail
	}
	if prefix < 0 {
		prefix = len(t)
	}
	return segs, prefix, ""
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// MustParse is Parse for patterns known to be good; it panics on a bad one.
func MustParse(s string) Pattern {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Check reports whether Parse accepts s: nil, or an *Error.
func Check(s string) error {
	_, err := Parse(s)
	return err
}

// ParseAll parses the patterns of one reservation (or one action's paths):
// at least one and at most MaxPatterns, each accepted by Parse. It refuses
// the list as a whole with an error naming every refused pattern (joined,
// each an *Error wrapping ErrBadPattern). Patterns equal after
// normalisation are kept once, first occurrence first.
func ParseAll(ss []string) ([]Pattern, error) {
	switch {
	case len(ss) == 0:
		return nil, fmt.Errorf("no path patterns; name at least one path relative to the repository root, like %q: %w", "src/auth/**", ErrBadPattern)
	case len(ss) > MaxPatterns:
		return nil, fmt.Errorf("%d path patterns, more than %d; name fewer, wider ones (a directory instead of its files): %w", len(ss), MaxPatterns, ErrBadPattern)
	}
	ps := make([]Pattern, 0, len(ss))
	var errs []error
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		p, err := Parse(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[p.text] {
			seen[p.text] = true
			ps = append(ps, p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ps, nil
}

// String returns the pattern as normalised text ("" for the zero Pattern),
// which Parse accepts and parses to an equal Pattern.
func (p Pattern) String() string { return p.text }

// IsZero reports whether p is the zero Pattern.
func (p Pattern) IsZero() bool { return p.segs == nil }

// Prefix returns the leading segments of p that hold no '*', joined by
// '/': "src/auth" for "src/auth/**" and for "src/auth/*.go", "" for
// "**/x.go" and "*.go", and the whole pattern when it has no '*'.
//
// It is what a board indexes a reservation by, since:
//
//   - a path can match p only if p.Prefix() is a segment-prefix of it
//     (one of SegmentPrefixes(path)), so the reservations that could hold
//     a path are those whose prefix is IN SegmentPrefixes(path);
//   - two patterns can overlap only if one's prefix is a segment-prefix of
//     the other's, so the reservations that could conflict with p are those
//     whose prefix is IN SegmentPrefixes(p.Prefix()), or equals p.Prefix(),
//     or starts with p.Prefix()+"/" (all, when p.Prefix() is ""). In SQL
//     LIKE, escape '%' and '_', which are ordinary characters here.
func (p Pattern) Prefix() string { return p.prefix }

// MarshalText returns p.String().
func (p Pattern) MarshalText() ([]byte, error) { return []byte(p.text), nil }

// UnmarshalText parses text as Parse does.
func (p *Pattern) UnmarshalText(text []byte) error {
	q, err := Parse(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// SegmentPrefixes returns the segment-prefixes of a clean repo-relative
// path, shortest first: "", "a", "a/b" and "a/b/c" for "a/b/c". These are
// the values Prefix can take for a pattern that matches the path.
func SegmentPrefixes(p string) []string {
	p = path.Clean(p)
	if p == "." {
		return []string{""}
	}
	out := make([]string, 1, strings.Count(p, "/")+2)
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

// Match reports whether the repo-relative path matches p. The path is
// cleaned first (path.Clean); "." (the root) has no segments, and a path
// that is absolute or climbs out with ".." matches nothing.
func Match(p Pattern, name string) bool {
	if p.segs == nil {
		return false
	}
	name = path.Clean(name)
	if name == "." {
		name = ""
	} else if name[0] == '/' || name == ".." || strings.HasPrefix(name, "../") {
		return false
	}
	// The classic wildcard walk, one segment to a token: a failed glob
	// backs up to the last "**" and lets it take one more segment. That is
	// exact because every token but "**" matches exactly one segment.
	segs := p.segs
	si, pos := 0, 0 // next token; start of the next segment of name
	star, starPos := -1, 0
	for name != "" && pos <= len(name) {
		end := strings.IndexByte(name[pos:], '/')
		if end < 0 {
			end = len(name)
		} else {
			end += pos
		}
		if si < len(segs) && segs[si].kind == globstar {
			star, starPos = si, pos
			si++
			continue
		}
		if si < len(segs) && segMatch(segs[si], name[pos:end]) {
			si++
			pos = end + 1
			continue
		}
		if star < 0 {
			return false
		}
		// Let the last "**" take one more segment.
		si = star + 1
		if e := strings.IndexByte(name[starPos:], '/'); e >= 0 {
			starPos += e + 1
		} else {
			starPos = len(name) + 1
		}
		pos = starPos
	}
	for si < len(segs) && segs[si].kind == globstar {
		si++
	}
	return si == len(segs)
}

func segMatch(s segment, seg string) bool {
	if s.kind == literal {
		return s.text == seg
	}
	return globMatch(s.text, seg)
}

// globMatch reports whether s matches g, in which '*' matches any run of
// bytes: the same walk as Match, one byte to a token.
func globMatch(g, s string) bool {
	gi, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		switch {
		case gi < len(g) && g[gi] == '*':
			star, starS = gi, si
			gi++
		case gi < len(g) && g[gi] == s[si]:
			gi++
			si++
		case star >= 0:
			gi = star + 1
			starS++
			si = starS
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
