//go:build !linux

package liveness

// alive is Watch.Alive with w.mu held: Alive of each, where there are no
// pidfds.
func (w *Watch) alive(pids []int) []bool { return each(pids) }

// forget has nothing to free where there are no pidfds.
func (w *Watch) forget(map[int]bool) {}
