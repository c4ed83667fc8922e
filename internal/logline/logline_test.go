package logline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestLog checks that a line is what slog.Logger.LogAttrs writes, but for
// the time, and that a level below the handler's writes nothing.
func TestLog(t *testing.T) {
	var got, want bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	l, ref := slog.New(slog.NewJSONHandler(&got, opts)), slog.New(slog.NewJSONHandler(&want, opts))
	attrs := []slog.Attr{slog.String("resource", "r"), slog.Uint64("token", 7), slog.Bool("unfenced", true)}
	Log(context.Background(), l, slog.LevelInfo, "lock acquired", attrs...)
	ref.LogAttrs(context.Background(), slog.LevelInfo, "lock acquired", attrs...)
	var g, w map[string]any
	if err := json.Unmarshal(got.Bytes(), &g); err != nil {
		t.Fatalf("line %q: %v", got.String(), err)
	}
	if err := json.Unmarshal(want.Bytes(), &w); err != nil {
		t.Fatal(err)
	}
	if g["time"] == nil {
		t.Errorf("line %q has no time", got.String())
	}
	delete(g, "time")
	delete(w, "time")
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("line %s, want %s as LogAttrs writes it", gb, wb)
	}
	got.Reset()
	Log(context.Background(), l, slog.LevelDebug, "not shown")
	if got.Len() != 0 {
		t.Errorf("a debug line at level info: %q", got.String())
	}
}
