# The two commands a newcomer needs: `make demo` and `make test`.
# Everything they use is installed or built here, at the pinned versions below, into bin/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export GOBIN := $(BIN)

CONTROLLER_GEN_VERSION ?= v0.21.0
CUE_VERSION ?= v0.17.1
HELM_VERSION ?= v3.22.0
IMG ?= redis-cluster-operator:dev
CHART := charts/redis-cluster-operator
INSTALLER ?= dist/install.yaml

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
CUE := $(BIN)/cue-$(CUE_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)

.PHONY: help
help: ## Show the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

##@ Tools (pinned, built into bin/)

$(CONTROLLER_GEN):
	go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(CUE):
	go install cuelang.org/go/cmd/cue@$(CUE_VERSION)
	mv $(BIN)/cue $@
	ln -sf $(notdir $@) $(BIN)/cue

# The helm CLI, for the chart's tests and for installing it (bin/helm).
$(HELM):
	go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@
	ln -sf $(notdir $@) $(BIN)/helm

.PHONY: tools
tools: codegen-tools $(HELM) devcluster-bins runtime-bins redis-server ## Install every pinned tool

.PHONY: codegen-tools
codegen-tools: $(CONTROLLER_GEN) $(CUE) ## Install controller-gen and cue, what the generated-files check needs

.PHONY: devcluster-bins
devcluster-bins: ## Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl and etcd from Go modules
	hack/devcluster/build.sh

.PHONY: runtime-bins
runtime-bins: ## Build containerd, its runc v2 shim and ctr from Go modules; install runc and the CNI plugins (Debian)
	hack/devcluster/install-node-packages.sh
	hack/devcluster/build-runtime.sh

.PHONY: images
images: ## Build the nodes' images (Redis, exporter, pause, operator) as OCI archives in bin/images
	hack/devcluster/images.sh

.PHONY: runtime-smoke
runtime-smoke: ## Run the images on a throwaway containerd and check Redis answers
	hack/devcluster/runtime-smoke.sh

.PHONY: redis-server
redis-server: ## Install redis-server and redis-cli (Debian packages) when missing
	hack/install-redis.sh

##@ Code generation

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC from the markers, and copy them and the alerts and dashboard into the Helm chart
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# The chart cannot read files outside itself: it gets copies, so config/ stays the one source.
	rm -f $(CHART)/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/role.yaml $(CHART)/files/manager-role.yaml
	cp config/rbac/leader_election_role.yaml $(CHART)/files/leader-election-role.yaml
	cp config/rbac/metrics_auth_role.yaml $(CHART)/files/metrics-auth-role.yaml
	cp config/rbac/metrics_reader_role.yaml $(CHART)/files/metrics-reader-role.yaml
	cp config/prometheus/prometheusrule.yaml $(CHART)/files/prometheusrule.yaml
	cp config/prometheus/grafana-dashboard.json $(CHART)/files/grafana-dashboard.json

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated files are not current
	@if [ -n "$$(git status --porcelain -- config/crd config/rbac api $(CHART)/crds $(CHART)/files)" ]; then \
		git status --short -- config/crd config/rbac api $(CHART)/crds $(CHART)/files; git diff --stat -- config/crd config/rbac api $(CHART)/crds $(CHART)/files; \
		echo "Generated files are stale or new: run 'make manifests generate' and commit"; exit 1; fi

##@ Build and run

.PHONY: build
build: ## Build the operator binary
	go build -o $(BIN)/manager .

.PHONY: render
render: build ## Print what the operator would apply for SAMPLE (default: the demo sample)
	$(BIN)/manager render -f $(or $(SAMPLE),config/samples/redis_v1alpha1_rediscluster.yaml)

.PHONY: run
run: build ## Run the operator against the current kubeconfig
	$(BIN)/manager

##@ Local Kubernetes, demo and tests

.PHONY: demo
demo: ## Start the local Kubernetes, run the operator, apply the sample and wait for it
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop everything `make demo` started
	hack/devcluster/down.sh

.PHONY: test
test: ## Run every test: unit, envtest and end to end on the local Kubernetes
	hack/test.sh

.PHONY: test-matrix
test-matrix: ## Run the e2e tests of each path (bootstrap, heal, scale, upgrade) on each non-default server (MATRIX_SERVERS, MATRIX_TESTS)
	hack/test-matrix.sh

.PHONY: bench
bench: ## Run the benchmarks: render, bootstrap and the whole operator beside redis-cli, slot migration beside redis-cli rebalance, backup and restore beside redis-cli --rdb and --pipe
	hack/bench.sh

##@ Deployment (docs/install.md)

.PHONY: install
install: manifests ## Install the CRD into the current cluster
	kubectl apply --server-side -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator (CRD, RBAC, Deployment) with image IMG
	kubectl kustomize config/default | sed 's#image: controller:latest#image: $(IMG)#' | kubectl apply --server-side -f -

.PHONY: build-installer
# No manifests step: it installs what is committed (verify-generated keeps that current).
build-installer: ## Write INSTALLER (dist/install.yaml): CRD, RBAC and Deployment with image IMG, in one file
	mkdir -p $(dir $(INSTALLER))
	kubectl kustomize config/default | sed 's#image: controller:latest#image: $(IMG)#' >$(INSTALLER)
	@echo "wrote $(INSTALLER) (image $(IMG)); install with: kubectl apply --server-side -f $(INSTALLER)"

.PHONY: undeploy
undeploy: ## Remove the operator only: the CRD and every RedisCluster stay (and keep serving)
	kubectl delete --ignore-not-found -k config/operator

.PHONY: uninstall-crd
uninstall-crd: ## Remove the CRD, which DELETES EVERY RedisCluster and its pods: refused while any exists, unless CONFIRM=yes
	@n=$$(kubectl get redisclusters.redis.middleware.hc.cn -A --no-headers 2>/dev/null | wc -l); \
	if [ "$$n" -gt 0 ]; then \
		echo "WARNING: deleting the CRD deletes every RedisCluster below ($$n), with its StatefulSet and Redis pods:"; \
		kubectl get redisclusters.redis.middleware.hc.cn -A; \
		if [ "$${CONFIRM:-}" != yes ]; then echo "Refused. Delete them first, or run: make uninstall-crd CONFIRM=yes"; exit 1; fi; \
	fi
	kubectl delete --ignore-not-found -k config/crd

.PHONY: uninstall
uninstall: uninstall-crd ## Same as uninstall-crd

.PHONY: docker-build
docker-build: ## Build the operator image IMG (needs a Docker engine; the project's machines have none)
	docker build -t $(IMG) .
