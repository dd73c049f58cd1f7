// Package testbin builds the commands bee's tests run, once for every test
// that runs them: across the test binaries of one `go test` run (each
// package is its own binary, and several run at once) and across runs.
//
// A build goes into a directory of the cache named by a key, a hash of
// everything that goes into the binaries: the name and content of every
// Go, assembly and embedded file of every package they link from the
// module (go list -deps decides which), the version of every other module
// they link, go.mod and go.sum; the toolchain and its settings (go env);
// and the build flags (-race or not, -ldflags). So a changed source is a
// new key and a test never runs a stale binary, while an unchanged tree
// finds its build made. Test binaries that want the same key at once wait
// on a file lock for one build, and a build appears under its key whole or
// not at all. Test files are no input: editing a test rebuilds nothing.
//
// The cache is $BEE_TEST_BIN_CACHE, else bee-testbin in the user's cache
// directory (os.UserCacheDir). Each new build prunes it to the builds used
// in the last hour and the 8 used last.
//
// Tests that run built commands skip under -short (SkipShort): `go test
// -short ./...` is the inner loop, and it builds nothing.
package testbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CacheEnv names the cache directory, overriding the default.
const CacheEnv = "BEE_TEST_BIN_CACHE"

// Commands are the import paths of bee's three commands.
var Commands = []string{
	"github.com/tractat-us/bee/cmd/bee",
	"github.com/tractat-us/bee/cmd/bee-mcp",
	"github.com/tractat-us/bee/cmd/bee-hook",
}

// Options says what to build.
type Options struct {
	// Packages are what to build: import paths, or patterns go build
	// takes, relative to Module. Each main package becomes a binary named
	// after its last path element.
	Packages []string
	// Race builds with -race.
	Race bool
	// LDFlags, if not empty, is passed to go build as -ldflags.
	LDFlags string
	// Module is the root directory of the module to build in. If empty,
	// the module that holds the working directory.
	Module string
	// Cache is the cache directory. If empty, CacheDir().
	Cache string
}

// A Build is a directory of built binaries.
type Build struct {
	// Dir holds one binary per main package. It never changes once made;
	// tests must not write into it.
	Dir string
	// Key names the build: a hash of its inputs.
	Key string
	// Made says this call ran go build; false when the cache held it.
	Made bool
}

// CacheDir returns the cache directory: $BEE_TEST_BIN_CACHE, else
// bee-testbin in the user's cache directory, else in the temporary
// directory.
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "bee-testbin")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("bee-testbin-%d", os.Getuid()))
}

// SkipShort skips tb under -short: it runs built commands.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("runs built commands: skipped under -short")
	}
}

var commands = sync.OnceValues(func() (Build, error) {
	return Make(Options{Packages: Commands})
})

// Dir returns the directory that holds bee, bee-mcp and bee-hook, built
// without the race detector, making it if the cache does not hold it. It
// skips tb under -short and fails it when the build fails.
//
// Not with -race even when the tests have it: the code these processes run
// is tested under -race in-process (internal/bridge, lifecycle, stdio,
// hooks), and a race-built bee-mcp starts and opens its board several
// times slower (SQLite in Go, instrumented), which doubled the time of the
// tests that start many.
func Dir(tb testing.TB) string {
	tb.Helper()
	SkipShort(tb)
	b, err := commands()
	if err != nil {
		tb.Fatal(err)
	}
	return b.Dir
}

// CommandsDir is Dir for a TestMain, before there is a test: it returns
// the directory or why it could not make it.
func CommandsDir() (string, error) {
	b, err := commands()
	return b.Dir, err
}

// Make returns the build o describes, from the cache when it holds it,
// else by running go build under the key's lock.
func Make(o Options) (Build, error) {
	if len(o.Packages) == 0 {
		return Build{}, errors.New("testbin: no packages to build")
	}
	if o.Module == "" {
		m, err := moduleRoot()
		if err != nil {
			return Build{}, err
		}
		o.Module = m
	}
	if o.Cache == "" {
		o.Cache = CacheDir()
	}
	key, _, err := Inputs(o)
	if err != nil {
		return Build{}, err
	}
	b := Build{Dir: filepath.Join(o.Cache, key), Key: key}
	if used(b.Dir) {
		return b, nil
	}
	if err := os.MkdirAll(o.Cache, 0o755); err != nil {
		return Build{}, fmt.Errorf("testbin: make the cache: %w", err)
	}
	unlock, err := lock(filepath.Join(o.Cache, key+".lock"))
	if err != nil {
		return Build{}, err
	}
	defer unlock()
	if used(b.Dir) { // another test binary built it while this one waited
		return b, nil
	}
	if err := build(o, b.Dir); err != nil {
		return Build{}, err
	}
	b.Made = true
	prune(o.Cache, key, time.Now())
	return b, nil
}

// used reports whether dir is a finished build, and marks it as used now
// so that pruning spares it.
func used(dir string) bool {
	now := time.Now()
	return os.Chtimes(dir, now, now) == nil
}

// build runs go build into a temporary directory beside dir and renames it
// to dir, so that dir appears whole.
func build(o Options, dir string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; the remains of a failure otherwise
	args := append(buildFlags(o), "-o", tmp+string(os.PathSeparator))
	cmd := exec.Command("go", append(append([]string{"build"}, args...), o.Packages...)...)
	cmd.Dir = o.Module
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbin: %s (in %s): %w\n%s", strings.Join(cmd.Args, " "), o.Module, err, out)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	return nil
}

func buildFlags(o Options) []string {
	var flags []string
	if o.Race {
		flags = append(flags, "-race")
	}
	if o.LDFlags != "" {
		flags = append(flags, "-ldflags", o.LDFlags)
	}
	return flags
}

// lock takes the exclusive lock on the file at path, waiting for it, and
// returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testbin: open the lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("testbin: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing lets the lock go
}

// Pruning keeps the builds of the last hour (a test binary of a run still
// going may start them again), then the keep most recently used, and
// removes the rest, with their locks and any leftover of a failed build.
const (
	keepFor = time.Hour
	keep    = 8
)

// prune removes from cache what pruning does not keep, as of now; key's
// build is always kept.
func prune(cache, key string, now time.Time) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	type build struct {
		name string
		used time.Time
	}
	var builds []build
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || strings.HasPrefix(e.Name(), key) {
			continue
		}
		if name, ok := strings.CutSuffix(e.Name(), ".lock"); ok { // goes with its build
			if _, err := os.Stat(filepath.Join(cache, name)); errors.Is(err, os.ErrNotExist) && now.Sub(info.ModTime()) > keepFor {
				_ = os.Remove(filepath.Join(cache, e.Name())) // a build that failed
			}
			continue
		}
		if strings.Contains(e.Name(), ".tmp-") {
			if now.Sub(info.ModTime()) > keepFor {
				_ = os.RemoveAll(filepath.Join(cache, e.Name()))
			}
			continue
		}
		builds = append(builds, build{e.Name(), info.ModTime()})
	}
	slices.SortFunc(builds, func(a, b build) int { return b.used.Compare(a.used) })
	for i, b := range builds {
		if i < keep-1 || now.Sub(b.used) <= keepFor { // key's build is the keep-th
			continue
		}
		_ = os.RemoveAll(filepath.Join(cache, b.name))
		_ = os.Remove(filepath.Join(cache, b.name+".lock"))
	}
}

// moduleRoot returns the directory of the go.mod nearest above the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("testbin: no go.mod above %s", dir)
		}
	}
}

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *struct {
		Path    string
		Version string
		Main    bool
		Dir     string
		GoMod   string
		Replace *struct {
			Path    string
			Version string
		}
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, FFiles, SFiles []string
	SwigFiles, SwigCXXFiles, SysoFiles, EmbedFiles                      []string
}

func (p *listed) files() []string {
	var all []string
	for _, fs := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles, p.FFiles,
		p.SFiles, p.SwigFiles, p.SwigCXXFiles, p.SysoFiles, p.EmbedFiles} {
		all = append(all, fs...)
	}
	return all
}

// env is the part of go env a build depends on beyond its files.
var env = []string{"GOVERSION", "GOROOT", "GOOS", "GOARCH", "GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED",
	"CC", "CXX", "CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_CXXFLAGS", "CGO_LDFLAGS",
	"GOAMD64", "GOARM", "GOARM64", "GO386", "GOMIPS", "GOMIPS64", "GOPPC64", "GORISCV64", "GOWASM"}

// Inputs returns the key of the build o describes and the files, relative
// to o.Module, whose content it hashes. o.Module must be set.
func Inputs(o Options) (key string, files []string, err error) {
	h := sha256.New()
	fmt.Fprintf(h, "bee testbin 1\nflags %q\npackages %q\n", buildFlags(o), o.Packages)

	goEnv := exec.Command("go", append([]string{"env", "-json"}, env...)...)
	goEnv.Dir = o.Module
	out, err := output(goEnv)
	if err != nil {
		return "", nil, err
	}
	h.Write(out)

	args := []string{"list", "-deps", "-json=ImportPath,Dir,Standard,Module,GoFiles,CgoFiles,CFiles,CXXFiles,MFiles,HFiles,FFiles,SFiles,SwigFiles,SwigCXXFiles,SysoFiles,EmbedFiles"}
	if o.Race {
		args = append(args, "-race")
	}
	list := exec.Command("go", append(args, o.Packages...)...)
	list.Dir = o.Module
	if out, err = output(list); err != nil {
		return "", nil, err
	}
	ih := &inputHash{h: h, module: o.Module, mods: map[string]bool{}}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return "", nil, fmt.Errorf("testbin: read go list: %w", err)
		}
		if err := ih.pkg(p); err != nil {
			return "", nil, err
		}
	}
	files = ih.files
	return hex.EncodeToString(h.Sum(nil)[:16]), files, nil
}

// An inputHash hashes the files a build reads, in go list's order.
type inputHash struct {
	h      hash.Hash
	module string
	files  []string        // hashed, relative to module
	mods   map[string]bool // the go.mod files of modules hashed already
}

// pkg hashes what package p's build reads: the module's version for a
// module the checksum database fixes, else its go.mod and go.sum (once a
// module) and the package's files. A standard package is named by
// GOVERSION and GOROOT alone.
func (ih *inputHash) pkg(p listed) error {
	fmt.Fprintf(ih.h, "package %s\n", p.ImportPath)
	m := p.Module
	switch {
	case p.Standard:
		return nil // the toolchain's: GOVERSION and GOROOT name it
	case m != nil && !m.Main && (m.Replace == nil || m.Replace.Version != ""):
		fmt.Fprintf(ih.h, "module %s %s\n", m.Path, m.Version) // immutable, checked by go.sum
		if m.Replace != nil {
			fmt.Fprintf(ih.h, "replaced %s %s\n", m.Replace.Path, m.Replace.Version)
		}
		return nil
	case m != nil && !ih.mods[m.GoMod]:
		ih.mods[m.GoMod] = true
		for _, f := range []string{m.GoMod, filepath.Join(filepath.Dir(m.GoMod), "go.sum")} {
			if err := ih.file(f); err != nil && !(errors.Is(err, os.ErrNotExist) && strings.HasSuffix(f, "go.sum")) {
				return err
			}
		}
	}
	names := p.files()
	slices.Sort(names)
	for _, name := range names {
		if err := ih.file(filepath.Join(p.Dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// file hashes the file at path under its name relative to the module.
func (ih *inputHash) file(path string) error {
	rel, err := filepath.Rel(ih.module, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = path
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	defer f.Close()
	fh := sha256.New()
	if _, err := io.Copy(fh, f); err != nil {
		return fmt.Errorf("testbin: read %s: %w", path, err)
	}
	fmt.Fprintf(ih.h, "file %q %x\n", filepath.ToSlash(rel), fh.Sum(nil))
	ih.files = append(ih.files, filepath.ToSlash(rel))
	return nil
}

// output runs cmd and returns its stdout, or an error with its stderr.
func output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testbin: %s (in %s): %w\n%s", strings.Join(cmd.Args, " "), cmd.Dir, err, stderr.Bytes())
	}
	return out, nil
}
