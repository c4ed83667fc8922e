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
	expirationsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_expirations_total", Help: "Leases that expired without being released.",
	})
	revocationsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_lock_revocations_total", Help: "Resources revoked by an admin, each fenced with a new token.",
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
)

func init() {
	prometheus.MustRegister(grantsTotal, renewalsTotal, releasesTotal, expirationsTotal,
		revocationsTotal, lockDelaysTotal, rejectionsTotal, leasesHeld, waiters, waitersRejectedTotal)
	for _, reason := range []string{"lock_held", "lease_lost"} {
		rejectionsTotal.WithLabelValues(reason)
	}
}
