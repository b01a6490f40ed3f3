// Package chartcheck holds the tests of the Helm chart in ../timerq: they
// render it with Helm, parse the manifests and check what the chart
// promises (probes, disruption budget, security context, topology spread,
// secrets kept out of plain values, the optional monitoring objects). It is
// a module of its own so that Helm and its Kubernetes dependencies stay out
// of timerq's module; Helm is pinned by the tool line of go.mod.
package chartcheck
