package httpapi

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Rejected requests are logged, but not every one of a flood: each class of
// rejection has a budget of lines, and the lines past it are counted instead
// (fence_http_rejection_logs_suppressed_total) and reported by the next
// line of the class that is logged, as "suppressed". So an abusive client
// cannot fill a disk with the server's log, while the rare rejections that
// matter (a stale holder fenced, an internal error) are all logged as long
// as they stay rare. The metrics count every rejection.
const (
	// fencedLogRate and fencedLogBurst bound the lines of requests
	// rejected fenced or token_not_issued: the audit trail of fencing,
	// given the larger budget.
	fencedLogRate  = 100
	fencedLogBurst = 1000
	// otherLogRate and otherLogBurst bound the lines of every other
	// rejection; internal errors have a budget of their own of this size,
	// so that a flood of bad requests does not hide them.
	otherLogRate  = 10
	otherLogBurst = 100
)

// Classes of rejections, each with its own budget of log lines.
const (
	logFenced   = "fenced"
	logInternal = "internal"
	logOther    = "other"
)

// logClass returns the budget that a rejection with problem code belongs to.
func logClass(code string) string {
	switch code {
	case "fenced", "token_not_issued":
		return logFenced
	case "internal":
		return logInternal
	}
	return logOther
}

// rejectionLogSuppressed counts the lines of rejected requests not logged,
// by class (fenced, internal, other).
var rejectionLogSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fence_http_rejection_logs_suppressed_total",
	Help: "Log lines of rejected requests not written because their class (fenced, internal, other) was over its budget; every rejection is still counted in fence_http_rejections_total.",
}, []string{"class"})

func init() {
	for _, c := range []string{logFenced, logInternal, logOther} {
		rejectionLogSuppressed.WithLabelValues(c)
	}
}

// logSampler hands out the budgets of log lines of one Handler.
type logSampler struct {
	once    sync.Once
	mu      sync.Mutex
	classes map[string]*logBudget
}

type logBudget struct {
	lim        *rate.Limiter
	suppressed int64 // lines not logged since the last one logged
}

// allow reports whether a line of class may be logged at now, and how many
// lines of its class were suppressed since the last one logged (reset by an
// allowed line).
func (ls *logSampler) allow(class string, now time.Time) (ok bool, suppressed int64) {
	ls.once.Do(func() {
		ls.classes = map[string]*logBudget{
			logFenced:   {lim: rate.NewLimiter(fencedLogRate, fencedLogBurst)},
			logInternal: {lim: rate.NewLimiter(otherLogRate, otherLogBurst)},
			logOther:    {lim: rate.NewLimiter(otherLogRate, otherLogBurst)},
		}
	})
	ls.mu.Lock()
	defer ls.mu.Unlock()
	b := ls.classes[class]
	if !b.lim.AllowN(now, 1) {
		b.suppressed++
		rejectionLogSuppressed.WithLabelValues(class).Inc()
		return false, 0
	}
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}
