# loopr — developer targets. `make test` is what CI runs.
GO      ?= go
PKGS    ?= ./...
BIN     ?= bin/loopr
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: all build test test-short lint fmt bench fuzz crash clean

all: build test

build:
	$(GO) build -ldflags "-X github.com/loopr-dev/loopr/cli.Version=$(VERSION)" -o $(BIN) ./cmd/loopr

test:
	$(GO) test -race $(PKGS)

test-short:
	$(GO) test -short $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Benchmarks print figures; see BENCHMARKS.md for how to read them.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -count 1 ./scheduler ./store ./tui 2>/dev/null | tee bench.out | grep -E '^(Benchmark|goos|goarch|cpu|pkg)' || true

# A short fuzz pass over every parser and the API (seconds each).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s ./config
	$(GO) test -run '^$$' -fuzz FuzzReadJSONL -fuzztime 10s ./store
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s ./artifact
	$(GO) test -run '^$$' -fuzz FuzzParseHint -fuzztime 10s ./ratelimit
	$(GO) test -run '^$$' -fuzz FuzzDecodeCreateRequest -fuzztime 10s ./daemon
	$(GO) test -run '^$$' -fuzz FuzzDecodeActionRequest -fuzztime 10s ./daemon
	$(GO) test -run '^$$' -fuzz FuzzDecodeBatchRequest -fuzztime 10s ./daemon
	$(GO) test -run '^$$' -fuzz FuzzAPI -fuzztime 30s ./daemon

# The crash suite at full strength: a real daemon on a 213-loop tree,
# SIGKILLed 20 times at random moments (CI runs the same test with 5).
# LOOPR_CRASH_SEED=N replays a kill schedule; LOOPR_CRASH_KEEP=DIR keeps the logs.
crash:
	LOOPR_CRASH_KILLS=$${LOOPR_CRASH_KILLS:-20} $(GO) test -count=1 -timeout 15m -run '^TestCrashSuite$$' -v ./e2e

clean:
	rm -rf bin bench.out
