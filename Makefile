# loopr — developer targets. `make test` is what CI runs.
GO      ?= go
PKGS    ?= ./...
BIN     ?= bin/loopr
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)

.PHONY: all build test test-short lint fmt bench fuzz crash clean

all: build test

build:
	$(GO) build -ldflags "-X github.com/loopr-dev/loopr/cli.Version=$(VERSION) -X github.com/loopr-dev/loopr/cli.Commit=$(COMMIT)" -o $(BIN) ./cmd/loopr

test:
	$(GO) test -race -timeout 30m $(PKGS)

test-short:
	$(GO) test -short $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every benchmark, with -benchmem, one package at a time (-p 1: they do
# not share the machine), then the one table of BENCHMARKS.md: each target
# figure, its baseline measured in the same run, the ratio, met or missed.
# Raw output in bench.out. About 5.5 minutes on 2 cores.
BENCH_OUT ?= bench.out
BENCH      = $(GO) test -p 1 -count 1 -run '^$$' -benchmem
bench:
	@rm -f $(BENCH_OUT)
	$(GO) build -o $(BIN) ./cmd/loopr
	$(BENCH) -bench . ./scheduler ./store ./control ./client ./tui 2>&1 | tee -a $(BENCH_OUT)
	$(BENCH) -bench 'DispatchLatency$$|DispatchLatencyEtcd$$|DispatchLatencyEtcdWorker$$|TickStarts' -benchtime 200x ./loopmgr 2>&1 | tee -a $(BENCH_OUT)
	$(BENCH) -bench 'DispatchLatencyWorktrees' -benchtime 40x ./loopmgr 2>&1 | tee -a $(BENCH_OUT)
	$(BENCH) -bench 'MergeQueue' -benchtime 1x ./mergequeue 2>&1 | tee -a $(BENCH_OUT)
	LOOPR_BIN=$(CURDIR)/$(BIN) $(BENCH) -bench . -benchtime 3x -timeout 20m ./internal/daemonbench 2>&1 | tee -a $(BENCH_OUT)
	@echo
	@$(GO) run ./internal/benchreport $(BENCH_OUT)
	@! grep -q '^FAIL' $(BENCH_OUT)

# A short fuzz pass over every parser and the API (seconds each).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s ./config
	$(GO) test -run '^$$' -fuzz FuzzReadJSONL -fuzztime 10s ./store
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s ./artifact
	$(GO) test -run '^$$' -fuzz FuzzParseHint -fuzztime 10s ./ratelimit
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s ./preset
	$(GO) test -run '^$$' -fuzz FuzzRender -fuzztime 10s ./transcript
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
