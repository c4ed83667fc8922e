// Package logline writes the log lines of fence's request path: slog
// records as slog.Logger.LogAttrs makes them, but without the caller's
// program counter, which the Logger takes with runtime.Callers on every
// line: a tenth of the cost of a line. fence serve's handler prints no
// source; a handler that does (AddSource, or log.Lshortfile behind
// slog.Default) gets none for these lines.
package logline

import (
	"context"
	"log/slog"
	"time"
)

// Log writes a line of level with msg and attrs to l, if l is enabled for
// level. A handler's error is dropped, as slog.Logger drops it.
func Log(ctx context.Context, l *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = l.Handler().Handle(ctx, r)
}
