package main

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Lines of net/http's error log (a TLS handshake that failed, a connection
// that could not be accepted) that fence serve writes: a client can cause
// one per connection, so they are sampled as the API's rejections are.
const (
	errorLogRate  = 10  // lines per second
	errorLogBurst = 100 // lines at once
)

// serverErrorLog returns the http.Server's ErrorLog: its lines go to logger
// at WARN, at most errorLogRate a second (bursts of errorLogBurst); the next
// line logged after some were left out says how many ("suppressed").
func serverErrorLog(logger *slog.Logger) *log.Logger {
	return log.New(&sampledLog{logger: logger, lim: rate.NewLimiter(errorLogRate, errorLogBurst)}, "", 0)
}

// sampledLog is the writer behind serverErrorLog.
type sampledLog struct {
	logger     *slog.Logger
	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed int64
}

func (l *sampledLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	if !l.lim.AllowN(time.Now(), 1) {
		l.suppressed++
		l.mu.Unlock()
		return len(p), nil
	}
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	attrs := []any{}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.logger.Warn(strings.TrimSpace(string(p)), attrs...)
	return len(p), nil
}
