// Package runfile manages bee's run directory and run files: the directory
// is 0700 and owned by the caller; run files are 0600, appear atomically,
// and are removed only while they hold the caller's token. [Sweep] removes
// the files of bridges that died without a word, never a live bridge's.
//
// A run file, <dir>/<claudePID>.json, tells bee-hook how to reach the bridge
// of one Claude process: {"port": <int>, "token": "<secret>", "pid": <bridge
// pid>}. The token is a secret: nothing in this package prints or logs it,
// and [Entry.String] leaves it out.
//
// Run files are runtime state: Write makes a file appear whole or not at all
// (temp file, then rename), but syncs nothing to disk. A run file describes
// a running bridge, and no bridge outlives a machine crash; a sync cost a
// bridge's start-up 2 to 25 ms on a busy disk. A file written just before a
// crash may be missing or empty afterwards, which a reader reports as it
// would any stale or malformed run file.
package runfile

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tractat-us/bee/internal/liveness"
)

// EnvDir is the environment variable that moves the run directory, for the
// bridge and the hook alike.
const EnvDir = "BEE_RUN_DIR"

// TokenBytes is how many random bytes a token holds; [NewToken] encodes
// them as 2*TokenBytes lowercase hex digits.
const TokenBytes = 32

// maxFileSize bounds what Read accepts; a real run file is under 200 bytes.
const maxFileSize = 4096

// ErrUnsafeDir is wrapped by the [*DirError] that [EnsureDir] returns when it
// refuses a directory: a symlink, not a directory, or owned by someone else.
var ErrUnsafeDir = errors.New("unsafe run directory")

// ErrMalformed is wrapped by the [*FileError] that [Read] returns for a run
// file that is not a valid entry.
var ErrMalformed = errors.New("malformed run file")

// A DirError reports a run directory that [EnsureDir] refuses or cannot
// prepare. Its message says what to do.
type DirError struct {
	Dir     string
	Problem string // what is wrong, e.g. "is a symlink"
	Hint    string // what to do about it
	Err     error  // ErrUnsafeDir for a refusal, else the cause
}

func (e *DirError) Error() string {
	msg := "run directory " + e.Dir + " " + e.Problem
	if e.Err != nil && e.Err != ErrUnsafeDir {
		msg += ": " + e.Err.Error()
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *DirError) Unwrap() error { return e.Err }

// A FileError reports a run file that cannot be read, written or removed,
// or is malformed. errors.Is(err, fs.ErrNotExist) reports a missing file and
// errors.Is(err, ErrMalformed) a malformed one.
type FileError struct {
	Path string
	Op   string // "read", "write" or "remove"
	Err  error
}

func (e *FileError) Error() string {
	return "run file " + e.Path + ": " + e.Op + ": " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// fileError builds a FileError, dropping an *fs.PathError's own copy of the
// path so the message names it once.
func fileError(path, op string, err error) *FileError {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		err = pe.Err
	}
	return &FileError{Path: path, Op: op, Err: err}
}

// Dir returns dir when it is not "", else DefaultDir(): what every
// option documented as `"" means the default run directory` resolves to.
func Dir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return DefaultDir()
}

// DefaultDir returns $BEE_RUN_DIR if it is set, else ~/.bee/run, as an
// absolute path. It does not create the directory (see [EnsureDir]).
func DefaultDir() (string, error) {
	if dir := os.Getenv(EnvDir); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("run directory from %s=%q: %w", EnvDir, dir, err)
		}
		return abs, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the run directory: %w; set %s", err, EnvDir)
	}
	return filepath.Join(home, ".bee", "run"), nil
}

// EnsureDir makes dir a private run directory. A missing directory is
// created (with any missing parents) with mode 0700. An existing one is
// checked without following a symlink: a symlink, a non-directory, or a
// directory owned by another user is refused with a [*DirError] wrapping
// [ErrUnsafeDir]; otherwise its mode is forced to 0700 if it is anything
// else (group or other bits, setgid, sticky). Only the last path element is
// checked.
func EnsureDir(dir string) error {
	if dir == "" {
		return &DirError{Dir: `""`, Problem: "is empty", Hint: "set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	}
	dir = filepath.Clean(dir) // a trailing slash would make Lstat follow a symlink
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return &DirError{Dir: dir, Problem: "cannot be created", Hint: "create it with mode 0700 or set " + EnvDir + " to a private directory", Err: err}
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return &DirError{Dir: dir, Problem: "cannot be read", Hint: "check its permissions or set " + EnvDir + " to a private directory", Err: err}
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &DirError{Dir: dir, Problem: "is a symlink", Hint: "remove it or set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	case !fi.IsDir():
		return &DirError{Dir: dir, Problem: "is not a directory", Hint: "remove it or set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	}
	if owner, me, ok := foreignOwner(fi); ok {
		return &DirError{Dir: dir, Problem: fmt.Sprintf("belongs to uid %d, not to you (uid %d)", owner, me), Hint: "set " + EnvDir + " to a directory of your own", Err: ErrUnsafeDir}
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return &DirError{Dir: dir, Problem: "cannot be made private (mode 0700)", Hint: "chmod 700 it or set " + EnvDir + " to a private directory", Err: err}
		}
	}
	return nil
}

// CheckDir checks, without changing anything, that dir is a private run
// directory a reader may trust: a directory (not a symlink) owned by the
// caller that no one else may write to. Otherwise it returns a [*DirError]
// wrapping [ErrUnsafeDir]. A missing dir is a [*FileError] for which
// errors.Is(err, fs.ErrNotExist) holds. Only the last path element is
// checked.
func CheckDir(dir string) error {
	if dir == "" {
		return &DirError{Dir: `""`, Problem: "is empty", Hint: "set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	}
	dir = filepath.Clean(dir)
	fi, err := os.Lstat(dir)
	if err != nil {
		return fileError(dir, "read", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &DirError{Dir: dir, Problem: "is a symlink", Hint: "remove it or set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	case !fi.IsDir():
		return &DirError{Dir: dir, Problem: "is not a directory", Hint: "remove it or set " + EnvDir + " to a private directory", Err: ErrUnsafeDir}
	}
	if owner, me, ok := foreignOwner(fi); ok {
		return &DirError{Dir: dir, Problem: fmt.Sprintf("belongs to uid %d, not to you (uid %d)", owner, me), Hint: "set " + EnvDir + " to a directory of your own", Err: ErrUnsafeDir}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &DirError{Dir: dir, Problem: fmt.Sprintf("can be written by others (mode %04o)", fi.Mode().Perm()), Hint: "chmod 700 it (a bridge does so when it starts)", Err: ErrUnsafeDir}
	}
	return nil
}

// An Entry is the content of one run file.
type Entry struct {
	Port  int    `json:"port"`  // the bridge's loopback control port
	Token string `json:"token"` // the control channel's bearer token: a secret
	PID   int    `json:"pid"`   // the bridge's process id
}

// String describes e without its token.
func (e Entry) String() string {
	return fmt.Sprintf("{port %d, bridge pid %d}", e.Port, e.PID)
}

// validate reports why e cannot be a run file's content.
func (e Entry) validate() error {
	switch {
	case e.Port < 1 || e.Port > 65535:
		return fmt.Errorf("port %d out of range 1..65535", e.Port)
	case e.Token == "":
		return errors.New("empty token")
	case e.PID < 1:
		return fmt.Errorf("bridge pid %d is not positive", e.PID)
	}
	return nil
}

// NewToken returns a fresh token: [TokenBytes] bytes from crypto/rand as
// lowercase hex.
func NewToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a run file token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Path returns the run file of the Claude process claudePID:
// <dir>/<claudePID>.json.
func Path(dir string, claudePID int) string {
	return filepath.Join(dir, strconv.Itoa(claudePID)+".json")
}

// Write makes e the run file of claudePID in dir, replacing any file there.
// It first calls [EnsureDir] and returns its error as is. It refuses an
// invalid entry (port outside 1..65535, empty token, non-positive pid) or
// a non-positive claudePID. The file is written as a 0600 temp file in dir,
// closed and renamed into place, so a reader sees the old file or the new
// one, never part of one; a failed write removes its temp file.
func Write(dir string, claudePID int, e Entry) (err error) {
	path := Path(dir, claudePID)
	if claudePID < 1 {
		return &FileError{Path: path, Op: "write", Err: fmt.Errorf("claude pid %d is not positive", claudePID)}
	}
	if err := e.validate(); err != nil {
		return &FileError{Path: path, Op: "write", Err: err}
	}
	if err := EnsureDir(dir); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return &FileError{Path: path, Op: "write", Err: err}
	}
	// The leading dot keeps temp files out of List.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fileError(path, "write", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil { // CreateTemp uses 0600 already; say it anyway
		return fileError(path, "write", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		return fileError(path, "write", err)
	}
	if err := f.Close(); err != nil {
		return fileError(path, "write", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fileError(path, "write", err)
	}
	return nil
}

// Read returns the run file of claudePID in dir, after [CheckDir] has
// found dir safe to trust (its error is returned as is: a file in a
// directory others can write to could send a token anywhere). A missing
// file or directory is a [*FileError] for which errors.Is(err,
// fs.ErrNotExist) holds; a file that is not a valid entry (bad JSON,
// unknown fields, over 4 KiB, port outside 1..65535, empty token,
// non-positive pid) is a [*FileError] wrapping [ErrMalformed]. Every error
// names the file's path or the directory's.
func Read(dir string, claudePID int) (Entry, error) {
	if err := CheckDir(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Entry{}, fileError(Path(dir, claudePID), "read", fs.ErrNotExist)
		}
		return Entry{}, err
	}
	e, _, err := read(Path(dir, claudePID))
	return e, err
}

// read reads and checks the run file at path, also returning what it
// found there, for Remove.
func read(path string) (Entry, fs.FileInfo, error) {
	// Lstat first: a symlink is refused, and opening a FIFO would block.
	if fi, err := os.Lstat(path); err != nil {
		return Entry{}, nil, fileError(path, "read", err)
	} else if !fi.Mode().IsRegular() {
		return Entry{}, nil, &FileError{Path: path, Op: "read", Err: fmt.Errorf("%w: not a regular file", ErrMalformed)}
	}
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, nil, fileError(path, "read", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, nil, fileError(path, "read", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return Entry{}, nil, fileError(path, "read", err)
	}
	if len(data) > maxFileSize {
		return Entry{}, nil, &FileError{Path: path, Op: "read", Err: fmt.Errorf("%w: larger than %d bytes", ErrMalformed, maxFileSize)}
	}
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Entry{}, nil, &FileError{Path: path, Op: "read", Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	if dec.More() {
		return Entry{}, nil, &FileError{Path: path, Op: "read", Err: fmt.Errorf("%w: data after the JSON object", ErrMalformed)}
	}
	if err := e.validate(); err != nil {
		return Entry{}, nil, &FileError{Path: path, Op: "read", Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	return e, fi, nil
}

// Remove deletes the run file of claudePID in dir only while it holds
// token, and reports whether it deleted it. A missing file, or one holding
// another token (a replacement bridge's), is left alone and gives
// (false, nil), so Remove may be called any number of times. A file that
// cannot be read or is malformed is left alone and returned as an error.
//
// A file replaced between Remove's check and its delete is put back: Remove
// takes the file aside with a rename, deletes it if it is the one it
// checked, and otherwise links it back unless a newer one has appeared.
func Remove(dir string, claudePID int, token string) (removed bool, err error) {
	path := Path(dir, claudePID)
	if token == "" {
		return false, &FileError{Path: path, Op: "remove", Err: errors.New("empty token")}
	}
	e, checked, err := read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !sameToken(e.Token, token) {
		return false, nil
	}
	if testHookRemoveChecked != nil {
		testHookRemoveChecked()
	}
	aside := filepath.Join(dir, "."+filepath.Base(path)+".rm-"+rand.Text())
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // removed by someone else since the check
		}
		return false, fileError(path, "remove", err)
	}
	if fi, err := os.Lstat(aside); err == nil && os.SameFile(fi, checked) {
		if err := os.Remove(aside); err != nil {
			return false, fileError(path, "remove", err)
		}
		return true, nil
	}
	// Replaced since the check: put the newer file back, unless one newer
	// still is already in place (then the one taken aside is stale anyway).
	if err := os.Link(aside, path); err != nil && !errors.Is(err, fs.ErrExist) {
		// No hard links here: rename it back, which can only clobber a
		// file written in this very instant.
		if err := os.Rename(aside, path); err != nil {
			return false, fileError(path, "remove", fmt.Errorf("putting back a replaced run file: %w", err))
		}
		return false, nil
	}
	os.Remove(aside)
	return false, nil
}

// testHookRemoveChecked, when set by a test, runs in Remove between the
// token check and taking the file aside.
var testHookRemoveChecked func()

func sameToken(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// A Listed is one run file found by [List]. Err is set, and Entry is zero,
// when the file could not be read or is malformed.
type Listed struct {
	ClaudePID int
	Path      string
	Entry     Entry
	Err       error
}

// List returns every run file in dir, <positive int>.json, sorted by
// ClaudePID; other names (temp files among them) are skipped. A missing
// directory has no run files: List returns (nil, nil). It reads dir as it
// is and neither creates nor checks it.
func List(dir string) ([]Listed, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing run directory %s: %w", dir, err)
	}
	var out []Listed
	for _, de := range des {
		stem, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(stem)
		if err != nil || pid < 1 || strconv.Itoa(pid) != stem {
			continue
		}
		l := Listed{ClaudePID: pid, Path: Path(dir, pid)}
		l.Entry, l.Err = Read(dir, pid)
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Listed) int { return a.ClaudePID - b.ClaudePID })
	return out, nil
}

// Sweep removes the run files in dir that bridges left behind when they
// died without a word (SIGKILL): a file whose bridge process, or whose
// Claude process, is dead by alive (nil means liveness.Alive). It returns
// the paths it removed.
//
// A file is removed only while it still holds the token Sweep read (see
// [Remove]), so a replacement bridge's file written meanwhile, for the same
// Claude process, survives. Sweep trusts dir only as [Read] does; files it
// cannot read, malformed ones among them, are left alone (see [List]), and
// so is a file whose processes are alive, even if a pid has been reused. A
// missing dir has nothing to sweep. The error is the first that stopped a
// listing or a removal; Sweep still tries every file.
func Sweep(dir string, alive func(pid int) bool) (removed []string, err error) {
	if alive == nil {
		alive = liveness.Alive
	}
	files, err := List(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Err != nil || alive(f.Entry.PID) && alive(f.ClaudePID) {
			continue
		}
		ok, rerr := Remove(dir, f.ClaudePID, f.Entry.Token)
		switch {
		case rerr != nil && err == nil:
			err = rerr
		case ok:
			removed = append(removed, f.Path)
		}
	}
	return removed, err
}
