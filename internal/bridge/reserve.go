package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/logkey"
	"github.com/tractat-us/bee/internal/pathcheck"
	"github.com/tractat-us/bee/repo"
)

// The session's side of reservations: the repository it works in, found
// once from its working directory, under which its tools reserve, release
// and list paths and its posts carry paths; and the edit and commit
// guards' question (CheckPaths), answered for whichever repository each
// file lands in (a session may edit another worktree).

// reservations is what a Session keeps for reservations. Fixed at
// creation.
type reservations struct {
	repo    repo.Repo // the session's repository; zero when repoErr is set
	repoErr error     // why the session's repository is not known
	where   *pathcheck.Locator
}

// newReservations finds the repository of dir ("" for the working
// directory) and makes the guard's locator, whose home it is.
func newReservations(dir string, log *slog.Logger) reservations {
	var res reservations
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			res.repoErr = fmt.Errorf("%w: the working directory: %w", errNoRepo, err)
		}
		dir = wd
	}
	if res.repoErr == nil {
		r, err := repo.Locate(dir)
		switch {
		case err != nil:
			res.repoErr = fmt.Errorf("%w: %w", errNoRepo, err)
		default:
			res.repo = r
		}
	}
	if res.repoErr != nil {
		log.Warn("cannot tell which repository this session works in; its tools cannot reserve paths, and its edits are still guarded", logkey.Err, res.repoErr)
	}
	res.where = pathcheck.NewLocator(&pathcheck.Options{Home: res.repo})
	return res
}

// errNoRepo is what a tool that needs the session's repository says when
// it is not known.
var errNoRepo = errors.New("bee cannot tell which repository this session works in")

// Repo returns the repository the session works in (its working
// directory's), or why it is not known.
func (s *Session) Repo() (repo.Repo, error) {
	return s.res.repo, s.res.repoErr
}

// repoName is the session's repository's name, or errNoRepo.
func (s *Session) repoName() (string, error) {
	if s.res.repoErr != nil {
		return "", s.res.repoErr
	}
	return s.res.repo.Name, nil
}

// CheckPaths answers the edit and commit guards for the session's current
// identity: which of paths (absolute files a tool or a commit would
// write) another holder's live exclusive reservation holds, in
// pathcheck.Check's order. Each file is judged in the repository where the
// write lands; a file in no repository (a plain folder other than the
// session's) is never held. The identity's own reservations never hold
// it. It returns an error when it cannot decide: the session has departed,
// a path cannot be placed, or the board cannot answer.
func (s *Session) CheckPaths(ctx context.Context, paths []string) ([]pathcheck.Held, error) {
	who, _, err := s.current()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	held, err := s.res.where.Check(ctx, s.source, actions.Agent(who), paths)
	if err != nil {
		return nil, err
	}
	if len(held) > 0 {
		h := held[0]
		s.log.Info("edit held by a reservation", logkey.Identity, who, logkey.Path, h.Path, logkey.Holder, h.Reservation.Holder,
			logkey.Reservation, h.Reservation.ID, logkey.Count, len(held), logkey.Elapsed, time.Since(start))
	} else {
		s.log.Debug("paths checked", logkey.Identity, who, logkey.Count, len(paths), logkey.Elapsed, time.Since(start))
	}
	return held, nil
}

// CheckPaths waits for the session and answers the guards
// (Session.CheckPaths). A session that could not be set up cannot decide.
func (p *Pending) CheckPaths(ctx context.Context, paths []string) ([]pathcheck.Held, error) {
	s, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	return s.CheckPaths(ctx, paths)
}
