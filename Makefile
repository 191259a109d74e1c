# gputopo: a topology-aware DRA scheduler for GPUs.
GO ?= go
OUT ?= _output

.PHONY: test test-short test-integration vet fmt-check fuzz bench bench-engine

# etcd for the integration tests, built from the module's tool dependency
# (no download outside the Go module proxy).
ETCD := bin/etcd
$(ETCD): go.mod go.sum
	$(GO) build -o $(ETCD) go.etcd.io/etcd/server/v3

## test: everything CI runs (vet, formatting, unit tests including the
## 10,000-case differential test against upstream's allocator, and the
## integration tests against a real kube-apiserver and etcd).
test: vet fmt-check $(ETCD)
	PATH="$(CURDIR)/bin:$$PATH" $(GO) test -count=1 -timeout 30m ./...

## test-integration: only the scheduler against a real API server.
test-integration: $(ETCD)
	PATH="$(CURDIR)/bin:$$PATH" $(GO) test -count=1 -timeout 20m ./test/integration/...

## test-short: the quick loop while editing the engine.
test-short:
	$(GO) test -count=1 -short ./pkg/...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: more differential cases against upstream (FUZZTIME=10m for longer).
FUZZTIME ?= 2m
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDifferentialAgainstUpstream -fuzztime $(FUZZTIME) ./pkg/allocator

## bench: performance against the in-tree allocator.
bench: bench-engine

## bench-engine: the engine against upstream's structured allocator on
## identical inputs (ns/op, allocs/op, side by side).
bench-engine:
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench BenchmarkFilterAllNodes -benchtime 50x -benchmem ./pkg/allocator | tee $(OUT)/bench-engine.txt
	$(GO) run ./hack/benchratio < $(OUT)/bench-engine.txt
