package engine

import (
	"errors"

	"github.com/tractat-us/bee/internal/liveness"
	"golang.org/x/sys/unix"
)

// poll answers alive with pidfds, w.mu held: it opens one for each pid
// first seen, asks all of them with one poll, and closes those of exited
// processes and of pids no longer asked about.
func (w *procWatch) poll(pids []int) []bool {
	w.round++
	live := make([]bool, len(pids))
	fds, at := w.pidfds(pids, live)
	if err := pollNow(fds); err != nil {
		// Cannot tell by the pidfds: ask each process.
		for _, i := range at {
			live[i] = liveness.Alive(pids[i])
		}
		return live
	}
	for j, i := range at {
		if fds[j].Revents == 0 {
			live[i] = true
			continue
		}
		// Exited (or the pidfd is unusable): the pid may have a new
		// process by now, which liveness.Alive finds. (A pid asked twice
		// has its pidfd closed once.)
		if p, ok := w.fds[pids[i]]; ok {
			closeFD(p.fd)
			delete(w.fds, pids[i])
		}
		live[i] = liveness.Alive(pids[i])
	}
	w.prune()
	return live
}

// pidfds returns the pidfd to poll for each of pids that has one (opened
// now when first seen), and the index in pids each answers; it answers
// the others in live at once: a pid no process has is not alive, and one
// whose pidfd cannot be opened is asked of liveness.Alive.
func (w *procWatch) pidfds(pids []int, live []bool) (fds []unix.PollFd, at []int) {
	fds, at = make([]unix.PollFd, 0, len(pids)), make([]int, 0, len(pids))
	for i, pid := range pids {
		p, ok := w.fds[pid]
		if !ok && len(w.fds) < maxWatched && pid > 0 {
			fd, err := unix.PidfdOpen(pid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // no such process: not alive
			}
			p, ok = pidfd{fd: fd}, err == nil
		}
		if !ok {
			live[i] = liveness.Alive(pid)
			continue
		}
		p.round = w.round
		w.fds[pid] = p
		fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
		at = append(at, i)
	}
	return fds, at
}

// pollNow polls fds without waiting.
func pollNow(fds []unix.PollFd) error {
	for {
		_, err := unix.Poll(fds, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// prune closes the pidfds of pids this round did not ask about.
func (w *procWatch) prune() {
	for pid, p := range w.fds {
		if p.round != w.round {
			closeFD(p.fd)
			delete(w.fds, pid)
		}
	}
}

func closeFD(fd int) { _ = unix.Close(fd) }
