//go:build unix

package runfile

import (
	"io/fs"
	"os"
	"syscall"
)

// foreignOwner reports the owner of fi and the caller's uid when they
// differ.
func foreignOwner(fi fs.FileInfo) (owner, me int, foreign bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	me = os.Getuid()
	return int(st.Uid), me, int(st.Uid) != me
}
