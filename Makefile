# The README's commands. `make run` and `make test` install what is missing, build, then serve or
# test. BUILD=build-asan etc. for other configurations.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
MODEL ?=
ARGS ?=

.PHONY: all deps configure build run test bench clean format

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Serves MODEL (default: the embedded model in models/default) on http://127.0.0.1:8080.
run: build
	./$(BUILD)/src/cli/loom serve $(MODEL) $(ARGS)

FUZZ_SECONDS ?= 30

# Every test: each parser fuzzer for FUZZ_SECONDS (clang + libFuzzer + ASan/UBSan, separate build
# dir), then the ctest suites (C++ unit/golden tests and the node API-client tests), whose summary
# is the last thing printed.
test: build
	JOBS=$(JOBS) ./tools/fuzz/run.sh $(FUZZ_SECONDS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/src/cli/loom bench $(MODEL) $(ARGS)

format:
	clang-format -i $$(git ls-files 'src/*.h' 'src/*.cc' 'src/*.cu' 'src/*.cuh')

clean:
	rm -rf $(BUILD)
