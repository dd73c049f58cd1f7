// Package pathcheck answers the edit and commit guards' question: does a
// live reservation of someone else hold a file a tool (or a commit) is
// about to write? It finds the repository of each file where the write
// would land (package repo: through symbolic links, and for files that do
// not exist yet), its path relative to that repository's root, and asks
// the board which exclusive reservations of others match it.
//
// The repository is that of the FILE, not of whoever asks: a session may
// edit another worktree or clone. A file outside every git repository can
// be reserved only when it lies in the asker's own folder (a session
// started in a plain folder reserves paths of that folder); any other such
// file is never held.
//
// It is cheap enough for every edit: the repository of a directory is
// found once and kept for a while (DefaultTTL), and the board's answer is
// one index lookup per repository. It keeps no reservation itself: every
// check asks the board.
package pathcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tractat-us/bee/repo"
)

// Bounds of the cache of repositories by directory.
const (
	// DefaultTTL is how long a directory's repository is kept. A folder
	// that becomes a repository (git init, a clone) or whose origin
	// changes is seen within it.
	DefaultTTL = time.Minute
	// maxCached is the most directories kept; a Locator that would keep
	// more starts over.
	maxCached = 1024
)

// A Place is where a write lands: the repository it belongs to and the
// file's path relative to that repository's root.
type Place struct {
	// Repo is the repository's name (repo.Repo.Name).
	Repo string
	// Rel is the clean, '/'-separated path from the repository's root.
	Rel string
}

// Options configures a Locator. nil means defaults.
type Options struct {
	// Home is the asker's own repository (a session's, from its working
	// directory): files in it are placed in it even when it is a plain
	// folder. The zero Repo means none.
	Home repo.Repo
	// TTL is how long a directory's repository is kept. 0 means
	// DefaultTTL; a negative TTL keeps nothing.
	TTL time.Duration
	// Now is the clock of the cache. nil means time.Now.
	Now func() time.Time
	// Locate finds a directory's repository. nil means repo.Locate.
	Locate func(dir string) (repo.Repo, error)
}

// A Locator places the files tools would write in their repositories. It
// is safe for concurrent use.
type Locator struct {
	// Fixed at creation.
	home      repo.Repo
	homePlain bool // home is a plain folder, not a git worktree
	ttl       time.Duration
	now       func() time.Time
	locate    func(string) (repo.Repo, error)

	mu   sync.Mutex // guards dirs
	dirs map[string]cachedRepo
}

type cachedRepo struct {
	r  repo.Repo
	at time.Time
}

// NewLocator returns a Locator configured by opts.
func NewLocator(opts *Options) *Locator {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Locate == nil {
		o.Locate = repo.Locate
	}
	return &Locator{
		home:      o.Home,
		homePlain: o.Home.Root != "" && Plain(o.Home),
		ttl:       o.TTL,
		now:       o.Now,
		locate:    o.Locate,
		dirs:      map[string]cachedRepo{},
	}
}

// Plain reports whether r is a plain folder rather than a git worktree:
// outside git, repo.Locate names a directory "<host>:<directory>", and no
// worktree's name has that form (without an origin a worktree is named by
// its git common directory, never by its own top).
func Plain(r repo.Repo) bool { return r.Name == repo.Host()+":"+r.Root }

// Place returns where a write to abs (an absolute path) lands, and ok
// false when that is where nothing can be reserved: outside every git
// worktree, and outside the Locator's home. The file is judged by where
// the write would land (repo.Resolve): a link into another repository
// places it there. It returns an error, never a guess, when abs is not
// absolute or cannot be resolved (a loop of links, a directory it may not
// look into), or when its repository cannot be found.
func (l *Locator) Place(abs string) (p Place, ok bool, err error) {
	target, err := repo.Resolve(abs)
	if err != nil {
		return Place{}, false, err
	}
	r, err := l.repoOf(filepath.Dir(target))
	if err != nil {
		return Place{}, false, err
	}
	if Plain(r) {
		if !l.homePlain {
			return Place{}, false, nil
		}
		r = l.home
	}
	rel, err := filepath.Rel(r.Root, target)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		// Outside home's plain folder, or the root itself: no file of a
		// repository.
		return Place{}, false, nil
	}
	return Place{Repo: r.Name, Rel: filepath.ToSlash(rel)}, true, nil
}

// repoOf returns the repository of dir (absolute and symlink-free), or of
// its nearest ancestor that exists as a directory (a Write may create
// directories).
func (l *Locator) repoOf(dir string) (repo.Repo, error) {
	for d := dir; ; {
		if r, ok := l.cached(d); ok {
			return r, nil
		}
		r, err := l.locate(d)
		switch {
		case err == nil:
			l.keep(d, r)
			return r, nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return repo.Repo{}, err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return repo.Repo{}, fmt.Errorf("no directory of %s exists: %w", dir, err)
		}
		d = parent
	}
}

func (l *Locator) cached(dir string) (repo.Repo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.dirs[dir]
	if !ok || l.now().Sub(c.at) >= l.ttl {
		return repo.Repo{}, false
	}
	return c.r, true
}

func (l *Locator) keep(dir string, r repo.Repo) {
	if l.ttl < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dirs) >= maxCached {
		clear(l.dirs)
	}
	l.dirs[dir] = cachedRepo{r: r, at: l.now()}
}
