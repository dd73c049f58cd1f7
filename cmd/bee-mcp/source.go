package main

import (
	"errors"
	"log/slog"

	"github.com/tractat-us/bee/actions"
)

const boardEnv = "BEE_BOARD"

func openSource(cfg config, log *slog.Logger) (actions.Source, error) {
	if cfg.source == "none" {
		return actions.NoActions{}, nil
	}
	return nil, errors.New("TEMPORARY: board not wired yet")
}
