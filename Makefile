# eppkit — `make test` is the one command CI runs (see .ci/run and README.md).
GO ?= go
# Every module of the repository: the root and any nested go.mod (examples).
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
# A count, not a duration: when a duration expires while the fuzzer is
# minimizing a new input, go test can fail with "context deadline exceeded".
FUZZTIME ?= 50000x

.PHONY: test vet fmt fuzz bench docs

test: fmt vet
	@for m in $(MODULES); do echo "== go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; done
	@echo "== allocation assertions (without -race, which adds allocations of its own)"
	@$(GO) test -count=1 -run 'Alloc' ./...
	@$(MAKE) --no-print-directory fuzz

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Brief fuzzing of every byte parser; run longer by hand, e.g. FUZZTIME=5m.
fuzz:
	@for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== fuzz $$t $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$t || exit 1; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./benchmarks/ ./kvindex/ ./scheduling/...

# The generated documentation: the plugin catalogue from the registry's
# metadata. go test ./cmd/eppkit fails while docs/plugins.md is stale.
docs:
	$(GO) run ./cmd/eppkit plugins --output markdown > docs/plugins.md
