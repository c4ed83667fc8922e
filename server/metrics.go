package server

import (
	"errors"
	"fmt"

	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/internal/support/buildinfo"
	"github.com/fence-lock/fence/lock"
	"github.com/fence-lock/fence/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// buildInfo is fence_build_info: 1, labelled with the binary's build.
var buildInfo = func() prometheus.Collector {
	i := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fence_build_info",
		Help:        "Always 1; its labels say which fence this is.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "go_version": i.GoVersion},
	})
	g.Set(1)
	return g
}()

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors, as the default registry has them, for a server's metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// RegisterMetrics registers every metric of a fence server in reg: the lock
// service's, the commit's, the HTTP API's and fence_build_info. Metrics
// registered already (by another server of the process on the same
// registry) are left as they are.
func RegisterMetrics(reg prometheus.Registerer) error {
	var all []prometheus.Collector
	all = append(all, lock.Metrics()...)
	all = append(all, state.Metrics()...)
	all = append(all, httpapi.Metrics()...)
	all = append(all, buildInfo)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("server: registering metrics: %w", err)
			}
		}
	}
	return nil
}
