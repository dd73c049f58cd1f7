package engine

import (
	"sync"

	"github.com/tractat-us/bee/internal/liveness"
)

// A procWatch tells reap which members' processes have died. reap runs
// before every look of every waiting call, over every member of the
// machine, so on a board of 32 bridges each post's addressee judged 33
// processes twice (its claim's look and the look after its finish); by
// liveness.Alive, a signal and a read of /proc/PID/stat each, that was
// about half of what the post cost it in CPU, before its claim. On Linux
// a procWatch keeps a pidfd of each member's process, which becomes
// readable once the process has exited (a zombie too), and asks all of
// them at once with one poll; elsewhere (or when a pidfd cannot be
// opened) it asks liveness.Alive.
//
// Its answers are liveness.Alive's: a pidfd that says "running" names the
// process it was opened on, which has not exited, so signal 0 would reach
// it and /proc would not show a zombie; one that says "exited" is closed
// and the pid asked again of liveness.Alive, which finds a new process
// should the pid have been reused meanwhile (the next look opens a pidfd
// on that one). A pid judged alive may, as with liveness.Alive, belong to
// a process that reused it before the watch first saw it.
//
// Its pidfds are closed when the engine closes; after that it asks
// liveness.Alive. It is safe for concurrent use.
type procWatch struct {
	mu     sync.Mutex    // guards the rest
	closed bool          // the engine has closed: no more pidfds
	fds    map[int]pidfd // by pid
	round  uint64        // counts the calls of poll
}

// A pidfd is an open pidfd and the last round of poll that asked of it.
type pidfd struct {
	fd    int
	round uint64
}

// maxWatched bounds the pidfds one Board keeps open; pids beyond it are
// asked of liveness.Alive each time.
const maxWatched = 512

func newProcWatch() *procWatch { return &procWatch{fds: make(map[int]pidfd)} }

// alive reports, for each of pids, whether its process runs (see
// liveness.Alive). pids are every member reap judges: the pidfds of
// others are closed.
func (w *procWatch) alive(pids []int) []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return aliveEach(pids)
	}
	return w.poll(pids)
}

// close closes the pidfds; later calls of alive ask liveness.Alive.
func (w *procWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for pid, p := range w.fds {
		closeFD(p.fd)
		delete(w.fds, pid)
	}
}

// aliveEach asks liveness.Alive of each pid.
func aliveEach(pids []int) []bool {
	live := make([]bool, len(pids))
	for i, pid := range pids {
		live[i] = liveness.Alive(pid)
	}
	return live
}
