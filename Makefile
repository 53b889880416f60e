# Local control plane for e2e tests (see tools/k8s/README.md).
.PHONY: k8s cluster-up cluster-down e2e corpus

k8s:
	scripts/build-k8s.sh

cluster-up:
	scripts/cluster-up.sh

cluster-down:
	scripts/cluster-down.sh

e2e:
	scripts/e2e.sh

# After an e2e run: refresh tests/corpus/ from the request bodies Troupe recorded.
corpus:
	python3 tests/e2e/update_corpus.py
