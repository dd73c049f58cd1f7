package liveness

import (
	"errors"

	"golang.org/x/sys/unix"
)

// alive is Watch.Alive with w.mu held: a pidfd per pid (opened the first
// time it is asked about), one poll for all of them.
func (w *Watch) alive(pids []int) []bool {
	alive := make([]bool, len(pids))
	polls, at := w.pidfds(pids, alive)
	if len(polls) == 0 {
		return alive
	}
	if err := pollNow(polls); err != nil {
		for _, i := range at {
			alive[i] = Alive(pids[i])
		}
		return alive
	}
	for j, p := range polls {
		i := at[j]
		if p.Revents == 0 {
			alive[i] = true
			continue
		}
		// The process exited. Its pid may since have gone to another
		// process, which Alive calls alive: then this pidfd is of no
		// more use.
		if alive[i] = Alive(pids[i]); alive[i] {
			w.close(pids[i])
		}
	}
	return alive
}

// pidfds returns what to poll for pids: a pidfd each, opened if w has
// none yet, and at, the index in pids of each. A pid with no process (or
// below 1) is left out, dead; one whose pidfd cannot be opened is left
// out, judged by Alive into alive. The pidfds of pids not asked about are
// closed.
func (w *Watch) pidfds(pids []int, alive []bool) (polls []unix.PollFd, at []int) {
	if w.fds == nil {
		w.fds = make(map[int]int)
	}
	asked := make(map[int]bool, len(pids))
	for i, pid := range pids {
		if pid <= 0 {
			continue
		}
		asked[pid] = true
		fd, ok := w.fds[pid]
		if !ok {
			var err error
			switch fd, err = unix.PidfdOpen(pid, 0); {
			case errors.Is(err, unix.ESRCH):
				continue // no such process
			case err != nil:
				alive[i] = Alive(pid) // no pidfds here (an old kernel, a sandbox)
				continue
			}
			w.fds[pid] = fd
		}
		polls = append(polls, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		at = append(at, i)
	}
	w.forget(asked)
	return polls, at
}

// pollNow polls polls without waiting: a pidfd is readable once its
// process has exited.
func pollNow(polls []unix.PollFd) error {
	for {
		_, err := unix.Poll(polls, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// forget closes the pidfds of the pids not in keep (all, for nil).
func (w *Watch) forget(keep map[int]bool) {
	for pid := range w.fds {
		if !keep[pid] {
			w.close(pid)
		}
	}
}

func (w *Watch) close(pid int) {
	if fd, ok := w.fds[pid]; ok {
		_ = unix.Close(fd)
		delete(w.fds, pid)
	}
}
