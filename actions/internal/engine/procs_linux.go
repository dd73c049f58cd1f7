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
	fds := make([]unix.PollFd, 0, len(pids))
	at := make([]int, 0, len(pids)) // fds[j] answers pids[at[j]]
	kept := 0                       // pidfds asked about in this round
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
		if p.round != w.round {
			p.round = w.round
			w.fds[pid] = p
			kept++
		}
		fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
		at = append(at, i)
	}
	for {
		_, err := unix.Poll(fds, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			// Cannot tell by the pidfds: ask each process.
			for _, i := range at {
				live[i] = liveness.Alive(pids[i])
			}
			return live
		}
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
			kept--
		}
		live[i] = liveness.Alive(pids[i])
	}
	if len(w.fds) > kept {
		for pid, p := range w.fds {
			if p.round != w.round {
				closeFD(p.fd)
				delete(w.fds, pid)
			}
		}
	}
	return live
}

func closeFD(fd int) { _ = unix.Close(fd) }
