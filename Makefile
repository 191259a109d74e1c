# gputopo: a topology-aware DRA scheduler for GPUs.
GO ?= go
OUT ?= _output

.PHONY: cgo test test-race test-short test-integration vet fmt-check lint fuzz bench bench-engine bench-perf bench-smoke bench-churn bench-large bench-memory

# etcd for the integration tests, built from the module's tool dependency
# (no download outside the Go module proxy).
ETCD := bin/etcd
$(ETCD): go.mod go.sum
	$(GO) build -o $(ETCD) go.etcd.io/etcd/server/v3

## test: everything CI runs (vet, formatting, unit tests including the
## 10,000-case differential test against upstream's allocator, and the
## integration tests against a real kube-apiserver and etcd).
test: cgo vet fmt-check $(ETCD)
	PATH="$(CURDIR)/bin:$$PATH" $(GO) test -count=1 -timeout 30m ./...

# go-nvml's bindings are cgo: without a C compiler Go turns cgo off and
# the build fails with "undefined: Return" in go-nvml, which says nothing
# of the cause.
cgo:
	@test "$$($(GO) env CGO_ENABLED)" = 1 || { echo "gputopo builds with cgo (go-nvml's bindings): install a C compiler (Debian: apt-get install gcc) or set CC, then run make again" >&2; exit 1; }

## test-integration: only the scheduler against a real API server.
test-integration: cgo $(ETCD)
	PATH="$(CURDIR)/bin:$$PATH" $(GO) test -count=1 -timeout 20m ./test/integration/...

## test-race: the packages whose code runs concurrently (kube-scheduler
## filters nodes in parallel through the plugins and the engine's shared
## memo; the kubelet calls the node agent concurrently) under the race
## detector, long runs skipped. CI runs it after make test.
test-race: cgo
	$(GO) test -count=1 -race -short -timeout 30m ./pkg/allocator/... ./pkg/plugins/... ./pkg/nodeagent/...

## test-short: the quick loop while editing the engine.
test-short: cgo
	$(GO) test -count=1 -short ./pkg/...

vet: cgo
	$(GO) vet ./...

## lint: golangci-lint with .golangci.yml, pinned in hack/tools/go.mod
## (built from the Go module proxy like every other dependency).
LINT := bin/golangci-lint
$(LINT): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o ../../$(LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
lint: cgo $(LINT)
	$(LINT) run ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: more differential cases against upstream (FUZZTIME=10m for longer).
FUZZTIME ?= 2m
fuzz: cgo
	$(GO) test -run '^$$' -fuzz FuzzDifferentialAgainstUpstream -fuzztime $(FUZZTIME) ./pkg/allocator

## bench: performance against the in-tree plugin: the engine on identical
## inputs, upstream's scheduler_perf harness (about 20 minutes), then the
## churn streams.
bench: bench-engine bench-perf bench-churn

## bench-churn: jobs arriving and leaving on NVLink-pair, NVSwitch, GB200,
## MIG and shared-GPU fleets, 10 seeds, both profiles in-process (1 to 2
## minutes); QUALITY lines per stream, seed and measure, tables in
## $(OUT)/churn/churn.md (docs/demo.md).
CHURN_SEEDS ?= 10
bench-churn: cgo
	@mkdir -p $(OUT)/churn
	$(GO) run ./cmd/demo --scenario=churn --seeds=$(CHURN_SEEDS) --quiet --out=$(OUT)/churn > $(OUT)/churn/summary.log
	@cat $(OUT)/churn/quality.txt

## bench-perf: upstream's DRA workloads and ours through scheduler_perf,
## each with the in-tree DynamicResources plugin and with gputopo; prints
## BENCH, LATENCY, E2E (queue wait included) and QUALITY lines and
## leaves the JSON data items (benchstat, perf-dash format) in
## $(OUT)/perf. PERF_FLAGS=-perf-cpuprofile adds
## CPU profiles and CPU lines (the scheduler's CPU per scheduled pod, from
## the last run); PERF_COUNT=N runs everything N times and reports medians
## and the range of the ratios (ratios move by up to 30% between runs).
PERF_OUT := $(OUT)/perf
PERF_FLAGS ?=
PERF_COUNT ?= 1
bench-perf: cgo $(ETCD)
	@rm -rf $(PERF_OUT) && mkdir -p $(PERF_OUT)
	PATH="$(CURDIR)/bin:$$PATH" $(GO) test -run '^$$' -bench BenchmarkPerfScheduling -benchtime 1ns -count $(PERF_COUNT) -timeout $$((60 * $(PERF_COUNT)))m ./test/perf \
		-args -data-items-dir=$(abspath $(PERF_OUT)) $(PERF_FLAGS) > $(PERF_OUT)/bench.log 2>&1 || (tail -50 $(PERF_OUT)/bench.log; exit 1)
	$(GO) run ./hack/perfreport $(PERF_OUT) | tee $(PERF_OUT)/report.txt

## bench-large: GPUFleet on 5,000 nodes (40,000 GPUs) through both
## profiles with CPU profiles (8 to 20 minutes): CPU seconds per pod in
## the scheduler's code and p50/p99 scheduling latency, side by side.
bench-large: cgo $(ETCD)
	@rm -rf $(OUT)/perf-large && mkdir -p $(OUT)/perf-large
	GPUTOPO_PERF_SCALE=large GPUTOPO_PERF_SUITES=gputopo PATH="$(CURDIR)/bin:$$PATH" $(GO) test -run '^$$' -bench BenchmarkPerfScheduling -benchtime 1ns -timeout 90m ./test/perf \
		-args -data-items-dir=$(abspath $(OUT)/perf-large) -perf-cpuprofile > $(OUT)/perf-large/bench.log 2>&1 || (tail -50 $(OUT)/perf-large/bench.log; exit 1)
	$(GO) run ./hack/perfreport -cpu-pods=2000 $(OUT)/perf-large | tee $(OUT)/perf-large/report.txt

## bench-memory: the scheduler binary's peak resident memory on a fleet
## of MEMORY_NODES GPU nodes (default 5,000), next to the same binary with
## only the in-tree plugins, each a process under the manifests' service
## account; fails above the memory limit the Deployment ships. Prints a
## MEMORY line.
MEMORY_NODES ?= 5000
bench-memory: cgo $(ETCD)
	@mkdir -p $(OUT)
	GPUTOPO_MEMORY_NODES=$(MEMORY_NODES) PATH="$(CURDIR)/bin:$$PATH" $(GO) test -count=1 -timeout 40m -run '^TestSchedulerMemory$$' -v ./test/integration/ \
		> $(OUT)/bench-memory.log 2>&1 || (tail -50 $(OUT)/bench-memory.log; exit 1)
	@grep -E '^MEMORY|memory_test.go' $(OUT)/bench-memory.log

## bench-smoke: every benchmark workload at its smallest size (CI).
bench-smoke: cgo $(ETCD)
	@rm -rf $(OUT)/perf-smoke && mkdir -p $(OUT)/perf-smoke
	GPUTOPO_PERF_SCALE=fast PATH="$(CURDIR)/bin:$$PATH" $(GO) test -run '^$$' -bench BenchmarkPerfScheduling -benchtime 1ns -timeout 20m ./test/perf \
		-args -data-items-dir=$(abspath $(OUT)/perf-smoke) > $(OUT)/perf-smoke/bench.log 2>&1 || (tail -50 $(OUT)/perf-smoke/bench.log; exit 1)
	$(GO) run ./hack/perfreport $(OUT)/perf-smoke
	$(MAKE) bench-churn CHURN_SEEDS=1 OUT=$(OUT)/smoke
	$(MAKE) bench-memory MEMORY_NODES=50 OUT=$(OUT)/smoke

## bench-engine: the engine against upstream's structured allocator on
## identical inputs (ns/op, allocs/op, side by side), and the engine's
## measurement of a pod without claims on a mixed fleet (upstream's
## plugin skips such pods).
bench-engine: cgo
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench 'BenchmarkFilterAllNodes|BenchmarkMeasureMixedFleet' -benchtime 50x -benchmem ./pkg/allocator | tee $(OUT)/bench-engine.txt
	$(GO) run ./hack/benchratio < $(OUT)/bench-engine.txt

# Release binaries and images. VERSION (the file) is the one source of the
# version: stamped into --version, the images' tag and the manifests' and
# the chart's image references (checked by manifests/version_test.go).
VERSION ?= $(shell cat VERSION)
REGISTRY ?= ghcr.io/gputopo
SCHEDULER_IMAGE ?= $(REGISTRY)/gputopo-scheduler:$(VERSION)
NODEAGENT_IMAGE ?= $(REGISTRY)/nodeagent:$(VERSION)
CONTAINER_TOOL ?= docker
# The last commit's time: the images' timestamps (BuildKit reads the build
# argument) and the binaries' modification time in them.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Extra flags for $(CONTAINER_TOOL) build, e.g. --platform, --push, or
# --output type=docker,rewrite-timestamp=true for bit-identical layers.
IMAGE_BUILD_FLAGS ?=
BIN_DIR ?= $(OUT)/bin
# The Kubernetes release the binaries are built on, stamped where
# kube-scheduler's own code reads its version (component-base: the
# kubernetes_build_info metric, --version=vX.Y.Z, the start-up log;
# client-go: the User-Agent); unstamped they say v0.0.0-master.
# (Read once, when a build needs it.)
K8S_VERSION = $(eval K8S_VERSION := $$(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes))$(K8S_VERSION)
K8S_VERSION_FIELDS = $(subst ., ,$(patsubst v%,%,$(K8S_VERSION)))
K8S_LDFLAGS = $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=$(word 1,$(K8S_VERSION_FIELDS)) -X $(p).gitMinor=$(word 2,$(K8S_VERSION_FIELDS)))
# Reproducible: no paths, VCS state or build IDs in the binaries, so the
# same commit and Go toolchain give the same bytes.
GO_BUILD_FLAGS = -trimpath -buildvcs=false -ldflags '-s -w -buildid= -X github.com/gputopo/gputopo/pkg/version.Version=$(VERSION) $(K8S_LDFLAGS)'

.PHONY: build build-gputopo-scheduler build-gputopo-nodeagent build-kubectl-gputopo image image-scheduler image-nodeagent

## build: the release binaries in $(BIN_DIR), stamped with VERSION and
## built as in the images (no Docker needed): gputopo-scheduler static,
## gputopo-nodeagent with cgo (go-nvml's NVML bindings are cgo and dlopen
## libnvidia-ml, so it links glibc), kubectl-gputopo static.
build: build-gputopo-scheduler build-gputopo-nodeagent build-kubectl-gputopo

build-gputopo-scheduler:
	CGO_ENABLED=0 $(GO) build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/gputopo-scheduler ./cmd/scheduler

build-gputopo-nodeagent: cgo
	CGO_ENABLED=1 $(GO) build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/gputopo-nodeagent ./cmd/nodeagent

build-kubectl-gputopo:
	CGO_ENABLED=0 $(GO) build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/kubectl-gputopo ./cmd/kubectl-gputopo

## image: both images from the Dockerfile with $(CONTAINER_TOOL), tagged
## $(SCHEDULER_IMAGE) and $(NODEAGENT_IMAGE) (REGISTRY and VERSION
## override; IMAGE_BUILD_FLAGS adds flags, e.g. --push).
image: image-scheduler image-nodeagent

image-scheduler:
	$(CONTAINER_TOOL) build --target scheduler --build-arg VERSION=$(VERSION) --build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(IMAGE_BUILD_FLAGS) -t $(SCHEDULER_IMAGE) .

image-nodeagent:
	$(CONTAINER_TOOL) build --target nodeagent --build-arg VERSION=$(VERSION) --build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(IMAGE_BUILD_FLAGS) -t $(NODEAGENT_IMAGE) .
