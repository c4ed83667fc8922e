package state

import "github.com/prometheus/client_golang/prometheus"

var (
	commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fence_storage_commit_duration_seconds",
		Help:    "Time to apply and make durable one commit (one engine transaction; with commits in flight, until it and every one before it are).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	confirmDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fence_storage_read_confirm_duration_seconds",
		Help:    "Time to confirm one batch of linearizable reads on a replicated engine (the read index's epoch check).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	commitBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fence_storage_commit_batch_size",
		Help:    "Changes carried by one commit (group commit).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
	})
)

// Metrics returns the storage's Prometheus metrics (fence_storage_*),
// shared by every DB of the process. The package registers them nowhere:
// register them in the registry that serves them.
func Metrics() []prometheus.Collector {
	return []prometheus.Collector{commitDuration, commitBatchSize, confirmDuration}
}
