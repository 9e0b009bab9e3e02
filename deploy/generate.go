// Package deploy holds payd's deployment files: the Helm chart, the
// Prometheus alerts and the Grafana dashboard. Its tests render and check
// them.
package deploy

// The JSON Schemas .ci/run checks the chart's manifests against with
// kubeconform (deploy/kubeschemas), made offline from the sources the Go
// module proxy serves.
//go:generate go run ../internal/kubeschemagen -out kubeschemas
