package liveness

import "sync"

// A Watch answers Alive for a set of processes asked about again and again
// (a board's reap asks about every member of its machine before every
// claim: with 32 bridges on a machine, 32 signals and 32 reads of /proc per
// claim, in every bridge). On Linux it keeps a pidfd per process, which
// becomes readable once the process has exited (a zombie included), and
// asks about all of them in one poll(2); elsewhere, or where pidfd_open is
// refused, it asks Alive. It is never quicker to call a process dead than
// Alive: a pidfd that says its process exited is confirmed by Alive (the
// pid may have been reused since, by a process Alive calls alive).
//
// A Watch is safe for concurrent use. The zero Watch is ready; Close frees
// its pidfds, after which it asks Alive.
type Watch struct {
	mu     sync.Mutex
	fds    map[int]int // pid → its pidfd
	closed bool
}

// Alive reports, for each of pids, whether its process is alive (see the
// package function Alive), and forgets the processes not among pids.
func (w *Watch) Alive(pids []int) []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return each(pids)
	}
	return w.alive(pids)
}

// Close frees the Watch's pidfds. Alive asks the package's Alive from then
// on.
func (w *Watch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forget(nil)
	w.closed = true
}

// each is Alive of each of pids.
func each(pids []int) []bool {
	alive := make([]bool, len(pids))
	for i, pid := range pids {
		alive[i] = Alive(pid)
	}
	return alive
}
