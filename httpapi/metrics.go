package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the HTTP API (see Metrics), served with the others at GET
// /metrics from Handler.Gatherer. None has a per-resource label: resource names are
// unbounded. The lock service owns the fence_lock_* metrics.
var (
	// storageWrites counts accepted storage writes by op: put, delete,
	// claim (POST /v1/fences) or txn.
	storageWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_storage_writes_total",
		Help: "Storage writes accepted, by op (put, delete, claim, txn).",
	}, []string{"op"})

	// storageRejections counts rejected requests to the storage routes
	// (/v1/kv, /v1/fences, /v1/txn) by reason, the problem code.
	storageRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_storage_rejections_total",
		Help: "Storage requests rejected, by reason (the problem code).",
	}, []string{"reason"})

	// httpRejections counts every problem answered, on any route, by route
	// pattern and problem code.
	httpRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_http_rejections_total",
		Help: "Requests answered with a problem, by route pattern and problem code.",
	}, []string{"route", "code"})

	// rateLimitedTotal counts requests refused by Handler.RateLimit.
	rateLimitedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_rate_limited_total",
		Help: "Requests answered 429 rate_limited because their client was over its rate limit (fence serve --rate-limit).",
	})

	// waitsRefused counts acquires not let wait by Handler.WaitersPerClient
	// or Handler.Waiters.
	waitsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_waits_refused_total",
		Help: "Acquires with wait_ms that were tried once instead of waiting, because their client or the server had as many waiting as allowed (fence serve --max-client-waiters, --max-total-waiters).",
	})

	// watchesRefused counts watch streams refused by
	// Handler.WatchersPerClient or Handler.Watchers.
	watchesRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_http_watches_refused_total",
		Help: "Watch streams answered 429 because their client or the server had as many open as allowed (fence serve --max-client-watchers, --max-total-watchers).",
	})

	// requestDuration observes every request by route pattern, method and
	// HTTP status. Its buckets reach 300 s, the longest acquire wait.
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fence_http_request_duration_seconds",
		Help:    "Duration of HTTP requests, by route pattern, method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"route", "method", "code"})
)

// Label values of the counters, created at init so that they show as 0.
var (
	writeOps         = []string{"put", "delete", "claim", "txn"}
	rejectionReasons = []string{"fenced", "token_not_issued", "precondition_failed", "fence_required", "invalid_token", "not_found", "bad_request", "too_large"}
)

// Metrics returns the HTTP API's Prometheus metrics (the request,
// rejection, rejection-log, rate-limit, waiter and watcher metrics fence_http_*, fence_storage_writes_total,
// fence_storage_rejections_total, fence_watch_*; fence serve's connection
// metrics are its own),
// shared by every Handler of the process. The package registers them
// nowhere: register them in the registry that Handler.Gatherer serves.
func Metrics() []prometheus.Collector {
	return []prometheus.Collector{storageWrites, storageRejections, httpRejections, requestDuration, rateLimitedTotal,
		waitsRefused, watchesRefused, watchStreams, watchCutoffs, watchEvents, rejectionLogSuppressed}
}

func init() {
	for _, op := range writeOps {
		storageWrites.WithLabelValues(op)
	}
	for _, r := range rejectionReasons {
		storageRejections.WithLabelValues(r)
	}
}

// methodLabel bounds the method label to the methods the API knows.
func methodLabel(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE":
		return m
	}
	return "other"
}
