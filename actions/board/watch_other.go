//go:build !linux

package board

import (
	"errors"
	"fmt"

	"github.com/tractat-us/bee/actions/internal/engine"
)

// A fileWatch is Linux's inotify watch of the database file (see
// watch_linux.go). Elsewhere there is none: each call's check of the file
// still stops the Board, and only an idle Board notices a move late.
type fileWatch struct{}

func watchFile(path string, _ func(), _ *engine.Life) (*fileWatch, error) {
	return nil, fmt.Errorf("watch %s: %w", path, errors.ErrUnsupported)
}

func (*fileWatch) close() error { return nil }
