package board

import "github.com/tractat-us/bee/actions/internal/position"

// cursors makes and reads the cursors of this board file (see package
// position): a file moved aside and made again has a new id, so the old
// file's cursors are refused.
func (b *Board) cursors() position.Cursors { return position.Cursors{ID: b.id, Where: b.path} }
