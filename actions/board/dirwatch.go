package board

import "errors"

// A dirOp is what happened to a file or folder of a dirWatch's event;
// one event may carry several.
type dirOp uint8

const (
	opCreate dirOp = 1 << iota // made, or moved in
	opWrite                    // written
	opRemove                   // removed
	opRename                   // moved away
	opChmod                    // attributes changed
)

// A dirEvent is one event of a dirWatch: a file or folder of a watched
// directory, or a watched directory itself, and what happened to it; or
// an error (the watch failed or lost events: something may have been
// missed).
type dirEvent struct {
	name string // the path: the watched directory's, joined with a file's name
	op   dirOp
	err  error
}

// has reports whether ev carries any of ops.
func (ev dirEvent) has(ops dirOp) bool { return ev.op&ops != 0 }

// errOverflow says a watch lost events: something may have been missed.
var errOverflow = errors.New("too many events; some were lost")
