// Package charttest tests the Helm chart in deploy/helm/fence, offline: it
// lints the chart with Helm's own linter, renders it for several sets of
// values and checks what the servers and the CronJob get, and validates every
// object rendered against the Kubernetes OpenAPI schemas (and the
// ServiceMonitor's CustomResourceDefinition) kept in testdata, rejecting
// unknown fields as the API server does.
//
// The package holds only tests. TestUpdateSchemas writes its testdata.
package charttest

//go:generate go test -run TestUpdateSchemas -update-schemas .
