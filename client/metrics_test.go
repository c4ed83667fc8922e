package client_test

import (
	"strings"
	"testing"

	_ "github.com/fence-lock/fence/client"
	"github.com/prometheus/client_golang/prometheus"
)

// TestNoMetricsRegistered checks that importing the client (and, in this
// test binary, the server packages its tests use) adds no fence metric to
// the default Prometheus registry: a program's registry is its own.
func TestNoMetricsRegistered(t *testing.T) {
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "fence_") {
			t.Errorf("%s is in the default registry", f.GetName())
		}
	}
}
