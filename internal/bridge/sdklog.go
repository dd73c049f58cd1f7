package bridge

import (
	"context"
	"log/slog"
)

// sdkHandler hands the go-sdk's log records to bee's handler one level
// down: its per-session info lines ("server session connected") are debug
// detail for a bee user, while its warnings and errors stay what they are.
type sdkHandler struct{ slog.Handler }

func (h sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkHandler{h.Handler.WithAttrs(as)}
}

func (h sdkHandler) WithGroup(name string) slog.Handler {
	return sdkHandler{h.Handler.WithGroup(name)}
}

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
