// Upstream projects' own manifests and CRDs for the discovery tests, pinned here by version and
// read from the Go module cache (`go list -m -f '{{.Dir}}' MODULE`), as envtest users read CRDs:
// never copied into the repository. No Go code: only the versions.
module prober.test/upstream

go 1.26.0

require github.com/flannel-io/flannel v0.28.10
