package logline

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"testing"
)

// TestLog checks that a line is the one slog.Logger.LogAttrs writes, byte
// for byte but for the time, and that a level below the handler's writes
// nothing.
func TestLog(t *testing.T) {
	var got, want bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	for _, h := range []struct {
		name     string
		got, ref slog.Handler
	}{
		{"json", slog.NewJSONHandler(&got, opts), slog.NewJSONHandler(&want, opts)},
		{"text", slog.NewTextHandler(&got, opts), slog.NewTextHandler(&want, opts)},
	} {
		got.Reset()
		want.Reset()
		l, ref := slog.New(h.got), slog.New(h.ref)
		attrs := []slog.Attr{slog.String("resource", "r"), slog.Uint64("token", 7), slog.Bool("unfenced", true)}
		Log(context.Background(), l, slog.LevelWarn, "write accepted", attrs...)
		ref.LogAttrs(context.Background(), slog.LevelWarn, "write accepted", attrs...)
		time := regexp.MustCompile(`"?time"?[=:]"?[^ ",]+"?`)
		if g, w := time.ReplaceAll(got.Bytes(), nil), time.ReplaceAll(want.Bytes(), nil); !bytes.Equal(g, w) || len(g) == got.Len() {
			t.Errorf("%s: line %q, want %q as LogAttrs writes it", h.name, got.String(), want.String())
		}
		got.Reset()
		Log(context.Background(), l, slog.LevelDebug, "not shown")
		if got.Len() != 0 {
			t.Errorf("%s: a debug line at level info: %q", h.name, got.String())
		}
	}
}
