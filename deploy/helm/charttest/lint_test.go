package charttest

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs helm lint (Helm's own linter: Chart.yaml, values.yaml and
// values.schema.json, every template rendered and parsed) on the chart
// with each value set under ci/, and fails on any warning or error. (Lint
// renders in Helm's lint mode, where the templates' fail and required only
// log: TestChart_BadValues checks those.)
func TestLint(t *testing.T) {
	for _, file := range []string{"etcd-values.yaml", "postgres-values.yaml"} {
		t.Run(file, func(t *testing.T) {
			vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", file))
			if err != nil {
				t.Fatal(err)
			}
			linter := lint.All(chartDir, vals, namespace, false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %v", m)
				} else {
					t.Logf("helm lint: %v", m)
				}
			}
		})
	}
}
