// Package reject logs and counts the writes a fencing guard refuses, as
// fence's own storage does: one log line and one count per rejection, with
// the resource, the token presented and the resource's fence. Every guard
// (postgres, redis, etcd, zookeeper, dynamodb, sqlguard) takes a
// *Recorder in its Rejections field; nil records nothing.
//
// Nothing is registered globally: the metric goes into the
// prometheus.Registerer given to New.
package reject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fence-lock/fence"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricName is the counter of rejections, labelled by store and reason.
const MetricName = "fence_guard_rejections_total"

// Reasons a guard refuses a write, as the API's problem codes name them.
const (
	ReasonFenced           = "fenced"
	ReasonInvalidSequencer = "invalid_sequencer"
	ReasonInvalidToken     = "invalid_token"
	ReasonBadRequest       = "bad_request"
)

// Recorder logs and counts the rejections of the guards of one store. It
// is safe for concurrent use; a nil *Recorder records nothing.
type Recorder struct {
	store  string
	logger *slog.Logger
	total  *prometheus.CounterVec
}

// New returns a Recorder for the guards of store ("postgres", "redis", ...)
// that logs to logger (nil: no log lines) and counts in reg (nil: no
// metric). It registers fence_guard_rejections_total{store,reason} in reg,
// or uses the one registered there already.
func New(store string, logger *slog.Logger, reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{store: store, logger: logger}
	if reg == nil {
		return r, nil
	}
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "Writes refused by fencing guards, by store and reason (fenced, invalid_sequencer, invalid_token, bad_request).",
	}, []string{"store", "reason"})
	if err := reg.Register(total); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, fmt.Errorf("reject: registering %s: %w", MetricName, err)
		}
		existing, ok := already.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("reject: %s is registered already as another kind of metric", MetricName)
		}
		total = existing
	}
	for _, reason := range []string{ReasonFenced, ReasonInvalidSequencer, ReasonInvalidToken, ReasonBadRequest} {
		total.WithLabelValues(store, reason)
	}
	r.total = total
	return r, nil
}

// Reason returns the reason err is a rejection for, "" if it is not one
// (a database error, say: the outcome of those is the store's, not a
// refusal).
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, fence.ErrFenced):
		return ReasonFenced
	case errors.Is(err, fence.ErrInvalidSequencer):
		return ReasonInvalidSequencer
	case errors.Is(err, fence.ErrInvalidToken):
		return ReasonInvalidToken
	case errors.Is(err, fence.ErrBadRequest):
		return ReasonBadRequest
	}
	return ""
}

// Observe records err, the result of a guarded operation op on resource
// with token, if it is a rejection, and returns err unchanged.
func (r *Recorder) Observe(ctx context.Context, op, resource string, token fence.Token, err error) error {
	reason := Reason(err)
	if r == nil || reason == "" {
		return err
	}
	if r.total != nil {
		r.total.WithLabelValues(r.store, reason).Inc()
	}
	if r.logger != nil {
		attrs := []slog.Attr{slog.String("store", r.store), slog.String("op", op), slog.String("code", reason),
			slog.String("resource", resource), slog.Uint64("presented", uint64(token))}
		var fe *fence.FencedError
		if errors.As(err, &fe) {
			attrs = append(attrs, slog.Uint64("last_fence", uint64(fe.LastFence)))
		}
		attrs = append(attrs, slog.String("detail", err.Error()))
		r.logger.LogAttrs(ctx, slog.LevelWarn, "guarded write rejected", attrs...)
	}
	return err
}
