package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
)

// chaosLog is the slog.Handler of the harness's log in fence chaos (a
// fault injected, a server restarted, a leader elected): each record is
// one line for people, as fence chaos's own lines are, not logfmt:
//
//	fence chaos: fault net at 553ms for 1ms: reset every connection
//	fence chaos: warning: leader-pause skipped: no fence server leads
//	fence chaos: error: restarting a fence server failed (server fence-2): exit status 1
//
// The attributes follow the message in parentheses, "key value", and an
// attribute named error last, after a colon. The servers' own logs do not
// come here: with --cluster they go to files beside the history.
type chaosLog struct {
	w     io.Writer
	attrs []slog.Attr // from WithAttrs, keys already qualified by their group
	group string      // from WithGroup: the prefix of the keys, "a.b."
}

// Enabled reports whether a record of level is written: INFO and above.
func (h *chaosLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}

// Handle writes r as one line, in one Write.
func (h *chaosLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("fence chaos: ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(logLine(r.Message))
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = appendAttr(attrs, h.group, a)
		return true
	})
	var errs []string
	n := 0
	for _, a := range attrs {
		if a.Key == "error" || strings.HasSuffix(a.Key, ".error") {
			errs = append(errs, logLine(a.Value.String()))
			continue
		}
		if n == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(a.Key + " " + logLine(a.Value.String()))
		n++
	}
	if n > 0 {
		b.WriteString(")")
	}
	for _, e := range errs {
		b.WriteString(": " + e)
	}
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

// WithAttrs returns a handler that writes attrs with every record.
func (h *chaosLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := *h
	next.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		next.attrs = appendAttr(next.attrs, h.group, a)
	}
	return &next
}

// WithGroup returns a handler whose attributes' keys start with name.
func (h *chaosLog) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	next := *h
	next.group = h.group + name + "."
	return &next
}

// appendAttr appends a to attrs, its key prefixed with group, a group's
// attributes one by one; empty attributes are left out.
func appendAttr(attrs []slog.Attr, group string, a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return attrs
	}
	if a.Value.Kind() == slog.KindGroup {
		prefix := group
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			attrs = appendAttr(attrs, prefix, ga)
		}
		return attrs
	}
	a.Key = group + a.Key
	return append(attrs, a)
}

// logLine returns s, quoted if it spans lines (a server's last words), so
// that a record stays one line.
func logLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strconv.Quote(s)
	}
	return s
}
