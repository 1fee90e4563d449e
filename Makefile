# The README's commands. `make run` and `make test` install what is missing, build, then serve or
# test. BUILD=build-foo CMAKE_FLAGS=... for other configurations.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
MODEL ?=
ARGS ?=

.PHONY: all deps configure build run test bench clean format format-check

all: build

deps:
	@./scripts/install-deps.sh

# Re-runs cmake on an existing build dir only when CMAKE_FLAGS says something.
configure: deps
	@[ -f $(BUILD)/build.ninja ] && [ -z "$(strip $(CMAKE_FLAGS))" ] || cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Serves MODEL (default: the embedded model in models/default) on http://127.0.0.1:8080.
run: build
	./$(BUILD)/src/cli/loom serve $(MODEL) $(ARGS)

FUZZ_SECONDS ?= 30
# 1: `make test` first fails on any C++ file clang-format would change (tools/format/check.sh).
# On since the tree-wide format; FORMAT_CHECK=0 skips it.
FORMAT_CHECK ?= 1
# 1: `make test` also builds the unit tests ASAN_TESTS with ASan + UBSan (LOOM_SANITIZE, GCC) in
# ASAN_BUILD and runs them (ctest names = target names). All of the ones below and io_test,
# tokenizer_test, chat_template_test and server_test ran clean on 2026-12-02 (UBSan found a
# memcmp of an empty vector in sample_test, fixed); those four are left out for CI time: their
# rooms take ~2,900 of the ~4,700 CPU-seconds an ASan build of all of them costs (2 cores).
SANITIZE ?= 1
ASAN_BUILD ?= build-asan
ASAN_TESTS ?= base_test tensor_test quant_test kv_test sched_test sample_test step_sampler_test \
  cpu_backend_test dummy_weights_test decoder_runner_test engine_test
empty :=
space := $(empty) $(empty)
# Where ctest's GTest XML reports go, for tools/test/summary.mjs.
RESULTS = $(abspath $(BUILD))/test-results

# Every test: the format check (FORMAT_CHECK), each parser fuzzer for FUZZ_SECONDS (clang +
# libFuzzer + ASan/UBSan, separate build dir), the unit tests under ASan/UBSan (SANITIZE), then the
# ctest suites (C++ unit/golden tests and the node API-client tests) and the count of test cases
# passed / failed / skipped with the reason of each skip, which is the last thing printed.
# CMAKE_FLAGS apply to both C++ builds (.ci/run adds -DLOOM_REQUIRE_SHARED_DATA=ON).
test: format-check build
	JOBS=$(JOBS) ./tools/fuzz/run.sh $(FUZZ_SECONDS)
ifeq ($(SANITIZE),1)
	@[ -f $(ASAN_BUILD)/build.ninja ] && [ -z "$(strip $(CMAKE_FLAGS))" ] || \
	  cmake -S . -B $(ASAN_BUILD) -G Ninja -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $(ASAN_TESTS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -R '^($(subst $(space),|,$(strip $(ASAN_TESTS))))$$'
endif
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@cd $(BUILD) && GTEST_OUTPUT=xml:$(RESULTS)/ ctest --output-on-failure -j $(JOBS) \
	  --output-junit $(RESULTS)/ctest.xml; status=$$?; \
	  node $(CURDIR)/tools/test/summary.mjs $(abspath $(BUILD)); exit $$status

format-check:
ifeq ($(FORMAT_CHECK),1)
	./tools/format/check.sh
endif

bench: build
	./$(BUILD)/src/cli/loom bench $(MODEL) $(ARGS)

format:
	./tools/format/check.sh --fix

clean:
	rm -rf $(BUILD)
