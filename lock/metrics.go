package lock

import "github.com/prometheus/client_golang/prometheus"

var (
	grantsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_grants_total", Help: "Leases granted, each with a new fencing token.",
	})
	renewalsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_renewals_total", Help: "Leases renewed, including same-holder acquire retries.",
	})
	releasesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_releases_total", Help: "Leases released by their holder.",
	})
	transfersTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_transfers_total", Help: "Leases handed by their holder to a waiter (named, or the first) in one change.",
	})
	expirationsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_expirations_total", Help: "Leases that expired without being released.",
	})
	revocationsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_revocations_total", Help: "Resources revoked by an admin, each fenced with a new token.",
	})
	revokeRequestsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_revoke_requests_total", Help: "Holders asked to let go by a deadline (cooperative revocation); the revokes at a deadline count in fence_lock_revocations_total.",
	})
	lockDelaysTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_delays_total", Help: "Lock-delays started after a lease expired.",
	})
	rejectionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fence_lock_rejections_total", Help: "Lock requests refused, by reason.",
	}, []string{"reason"})
	leasesHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fence_lock_leases_held", Help: "Leases currently held.",
	})
	waitersRejectedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_waiters_rejected_total", Help: "Acquires refused at once because their resource had MaxWaiters waiters.",
	})
	waiters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fence_lock_waiters", Help: "Acquires currently waiting for a lock.",
	})
	waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fence_lock_wait_seconds",
		Help:    "Time from an acquire's arrival to its grant (0 when the lock was free).",
		Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
	})
	holdSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fence_lock_hold_seconds",
		Help:    "Time a lease was held, from its grant to its end (a release, an expiry or a revoke); restored leases are not counted.",
		Buckets: []float64{.01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 86400},
	})
)

func init() {
	for _, reason := range []string{"lock_held", "lease_lost", "forbidden", "no_successor", "limit_mismatch", "session_over"} {
		rejectionsTotal.WithLabelValues(reason)
	}
}

// Metrics returns the lock service's Prometheus metrics (fence_lock_*),
// shared by every Service of the process. The package registers them
// nowhere: register them in the registry that serves them.
func Metrics() []prometheus.Collector {
	return []prometheus.Collector{grantsTotal, renewalsTotal, releasesTotal, transfersTotal, expirationsTotal,
		revocationsTotal, revokeRequestsTotal, lockDelaysTotal, rejectionsTotal, leasesHeld, waiters, waitersRejectedTotal,
		waitSeconds, holdSeconds}
}
