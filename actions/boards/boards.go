// Package boards opens the board a location names, so that every bee
// program (bee-mcp, bee) takes the same locations: a postgres:// or
// postgresql:// URL is the PostgreSQL board (actions/pgboard), anything
// else is the file of the embedded board (actions/board). $BEE_BOARD and
// --board hold either.
package boards

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/actions/pgboard"
)

// EnvLocation names the environment variable that says where the board is.
const EnvLocation = board.EnvPath

// ErrNoBoard: Options.MustExist was set and the location has no board yet.
var ErrNoBoard = errors.New("no board there")

// Options configure Open. A nil *Options gives the defaults.
type Options struct {
	// Logger receives the board's logs. Nil discards them.
	Logger *slog.Logger
	// MustExist refuses a location with no board yet (ErrNoBoard) instead
	// of creating one, so that a mistyped location never shows an empty
	// board to someone reading it.
	MustExist bool
	// OpenBy, when set, is when opening a board on a server must have
	// ended, whatever the server does (see pgboard.Options.OpenBy): for a
	// command that must end by a deadline. A file board ignores it.
	OpenBy time.Time
}

// IsRemote reports whether location names a board on a server rather than
// a file.
func IsRemote(location string) bool { return pgboard.IsLocation(location) }

// Location returns the board's location: $BEE_BOARD (read with getenv)
// when set, else ~/.bee/board.db.
func Location(getenv func(string) string) (string, error) {
	if l := getenv(EnvLocation); l != "" {
		return l, nil
	}
	return board.DefaultPath()
}

// Created reports whether opening b created it (a new file, or a database
// that had no board): a program that creates boards says so, so that a
// mistyped location does not pass unnoticed as an empty board.
func Created(b actions.Board) bool {
	c, ok := b.(interface{ Created() bool })
	return ok && c.Created()
}

// Open opens the board at location, a postgres:// or postgresql:// URL or
// a file path, and returns it as an actions.Board; the caller must Close
// it. Errors name the location (never a URL's password) and say what to
// do.
func Open(location string, opts *Options) (actions.Board, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if location == "" {
		return nil, fmt.Errorf("open board: no location given (a file path or a postgres:// URL)")
	}
	if IsRemote(location) {
		b, err := pgboard.Open(location, &pgboard.Options{Logger: o.Logger, NoCreate: o.MustExist, OpenBy: o.OpenBy})
		if errors.Is(err, pgboard.ErrNoBoard) {
			return nil, noBoardError{err}
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if o.MustExist {
		if _, err := os.Stat(location); errors.Is(err, fs.ErrNotExist) {
			return nil, noBoardError{fmt.Errorf("no board at %s: nothing has been posted there yet; check the path (a post creates the board)", location)}
		}
	}
	b, err := board.Open(location, &board.Options{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// A noBoardError says that a location has no board, in the words of the
// error it holds, and wraps ErrNoBoard without saying it again.
type noBoardError struct{ err error }

func (e noBoardError) Error() string   { return e.err.Error() }
func (e noBoardError) Unwrap() []error { return []error{ErrNoBoard, e.err} }
