# Thin wrapper over CMake. `make demo` and `make test` install what is
# missing first (see scripts/deps.sh), then build in build/. Everything a
# target writes stays inside the build directories (configure logs too), so
# `git status` is clean after any of them.
BUILD   ?= build
ASAN    ?= build-asan
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# `make install PREFIX=/opt/ckpt` (default: CMake's, /usr/local); DESTDIR
# is honoured by cmake --install itself.
PREFIX  ?=
# What the demo runs (examples/demo.sh): the supervisor and the C trainer
# (which pulls in libckpt); the tests, fuzzers and benchmarks are left to
# `make test` and `make bench`.
DEMO_TARGETS = ckptrun c_trainer

.PHONY: all deps configure build demo test test-fast test-asan test-peers stress bench install clean

all: build

deps:
	@bash scripts/deps.sh

# Configure once per build directory; its log stays inside it.
configure:
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD)/configure.log 2>&1 || { cat $(BUILD)/configure.log; exit 1; }
	@grep -E '^-- ckpt:' $(BUILD)/configure.log || true

build: configure
	@MAKEFLAGS=--no-print-directory cmake --build $(BUILD) -j $(JOBS)

demo: deps configure
	@MAKEFLAGS=--no-print-directory cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS)
	@bash examples/demo.sh $(BUILD)

# The object-store peers the tests start (s3rver, azurite), pinned by
# tests/npm/package-lock.json.
test-peers:
	@if [ ! -d tests/npm/node_modules ] || [ tests/npm/package-lock.json -nt tests/npm/node_modules ]; then \
		echo "test-peers: npm ci (s3rver, azurite)"; \
		cd tests/npm && npm ci --no-audit --no-fund --loglevel=error && touch node_modules; \
	fi

# Every test, then the whole suite again under AddressSanitizer + UBSan.
# The long randomized trials (label `stress`) run with `make stress`.
test: deps build test-peers
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE stress
	@$(MAKE) --no-print-directory test-asan

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE stress

stress: deps build
	@cd $(BUILD) && ctest --output-on-failure -L stress

test-asan:
	@mkdir -p $(ASAN)
	@cmake -S . -B $(ASAN) -DCKPT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) > $(ASAN)/configure.log 2>&1 || { cat $(ASAN)/configure.log; exit 1; }
	@MAKEFLAGS=--no-print-directory cmake --build $(ASAN) -j $(JOBS)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS) -LE 'nosan|stress'

bench: deps build test-peers
	@bash scripts/deps.sh --bench
	@bash bench/run.sh $(BUILD)

# ckptrun, the libraries, ckpt.h, ckpt.pc, the CMake package, the manual
# page and the bash/zsh completions.
install: build
	@cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(ASAN)
