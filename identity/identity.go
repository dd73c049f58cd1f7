// Package identity owns bee's agent identities: the form
// agent:<name>#<8 lowercase hex>, minting them from crypto/rand, and the
// agent names they carry. It promises that every ID it mints or parses is
// well formed, and that two mints never share a suffix by design (32 random
// bits per mint).
package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// An ID is one agent identity, for example agent:cleartest#0491068b.
type ID string

// Prefix starts every identity.
const Prefix = "agent:"

// MaxNameLen bounds an agent name.
const MaxNameLen = 64

// FallbackName is the agent name used when none can be derived.
const FallbackName = "agent"

// ReservedName is no agent's name: on the board "people" addresses any
// person, so an agent that carried it would take what is meant for people.
// CheckName refuses it, and NameFromDir derives FallbackName instead.
const ReservedName = "people"

// The patterns are compiled at first use, not at start-up: bee-hook links
// this package and starts on every edit (the PreToolUse guard), and most of
// its runs never look at an identity.
var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })
	idRE   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^agent:([A-Za-z0-9][A-Za-z0-9._-]*)#([0-9a-f]{8})$`)
	})
)

// ErrBadName is returned (wrapped) for an agent name that is empty, too
// long, holds characters other than letters, digits, '.', '_' and '-', or
// is ReservedName.
var ErrBadName = errors.New("bad agent name")

// ErrBadID is returned (wrapped) by Parse for a string not of the form
// agent:<name>#<8 lowercase hex>.
var ErrBadID = errors.New("bad identity")

// CheckName reports whether name can be an agent name.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrBadName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w %q: longer than %d characters", ErrBadName, name, MaxNameLen)
	}
	if !nameRE().MatchString(name) {
		return fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", ErrBadName, name)
	}
	if name == ReservedName {
		return fmt.Errorf("%w %q: reserved, since on the board it addresses people; choose another name", ErrBadName, name)
	}
	return nil
}

// NameFromDir derives a default agent name from a working directory: its
// base name with every character an agent name cannot hold replaced by '-'.
// It returns FallbackName when nothing usable is left.
func NameFromDir(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.TrimLeft(b.String(), "._-")
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
	}
	if CheckName(name) != nil {
		return FallbackName
	}
	return name
}

// Mint returns a fresh identity for the agent name, its suffix 4 bytes from
// crypto/rand.
func Mint(name string) (ID, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mint identity: %w", err)
	}
	return ID(Prefix + name + "#" + hex.EncodeToString(b[:])), nil
}

// Parse checks that s is a well-formed identity and returns it. An
// identity of ReservedName is not well formed.
func Parse(s string) (ID, error) {
	if !IsID(s) {
		return "", fmt.Errorf("%w %q: want agent:<name>#<8 lowercase hex>, the name not %q", ErrBadID, s, ReservedName)
	}
	return ID(s), nil
}

// IsID reports whether s has the form of an identity (as opposed to a bare
// agent name), of an agent name other than ReservedName.
func IsID(s string) bool {
	m := idRE().FindStringSubmatch(s)
	return m != nil && m[1] != ReservedName
}

// Agent returns the agent name the identity carries, or "" when id is not
// well formed.
func (id ID) Agent() string {
	m := idRE().FindStringSubmatch(string(id))
	if m == nil {
		return ""
	}
	return m[1]
}

// String returns the identity as text.
func (id ID) String() string { return string(id) }
