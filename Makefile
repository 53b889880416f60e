# Local control plane for e2e tests (see tools/k8s/README.md).
.PHONY: k8s cluster-up cluster-down

k8s:
	scripts/build-k8s.sh

cluster-up:
	scripts/cluster-up.sh

cluster-down:
	scripts/cluster-down.sh
