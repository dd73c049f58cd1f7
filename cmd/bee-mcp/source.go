package main

import (
	"log/slog"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
)

// openSource opens the action source the flags name: the shared board
// (the default) or NoActions.
func openSource(cfg config, log *slog.Logger) (actions.Source, error) {
	if cfg.source == "none" {
		return actions.NoActions{}, nil
	}
	path := cfg.boardPath
	if path == "" {
		var err error
		if path, err = board.DefaultPath(); err != nil {
			return nil, err
		}
	}
	return board.Open(path, &board.Options{Logger: log})
}
