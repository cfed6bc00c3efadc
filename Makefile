# Thin wrapper over CMake. `make demo` and `make test` install what is
# missing of what they need first (scripts/deps.sh: the demo set is the
# compiler, cmake and the libraries; the test set adds cmocka, torch, SLURM,
# Open MPI, Node.js...), then build in build/. Everything a target writes
# stays inside the build directories (configure logs too), so `git status`
# is clean after any of them.
BUILD   ?= build
ASAN    ?= build-asan
TSAN    ?= build-tsan
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# `make install PREFIX=/opt/ckpt` (default: CMake's, /usr/local); DESTDIR
# is honoured by cmake --install itself.
PREFIX  ?=
# What the demo runs (examples/demo.sh): the supervisor and the C trainer
# (which pulls in libckpt); and the Python package (a copy of its files
# beside libckpt.so), so that the user's own `import ckpt` trainer runs
# under this ckptrun right after `make demo`. The tests, fuzzers and
# benchmarks are left to `make test` and `make bench`.
DEMO_TARGETS = ckptrun c_trainer ckpt_python

.PHONY: all deps deps-demo deps-test deps-bench configure build demo test test-fast test-asan test-tsan \
	test-peers stress bench build-clang build-nostores build-release install clean

# $(call configure_in,DIR,FLAGS): (re)configure DIR; its log stays inside it.
configure_in = mkdir -p $(1) && \
	{ cmake -S . -B $(1) $(2) $(CMAKE_FLAGS) > $(1)/configure.log 2>&1 || { cat $(1)/configure.log; exit 1; }; }

all: build

# Every package set (demo, tests, benchmarks, CI's clang); each job below
# asks only for its own.
deps:
	@bash scripts/deps.sh --all

deps-demo:
	@bash scripts/deps.sh --demo

deps-test:
	@bash scripts/deps.sh --test

deps-bench:
	@bash scripts/deps.sh --test --bench

# Configure once per build directory; its log stays inside it.
configure:
	@$(call configure_in,$(BUILD))
	@grep -E '^-- ckpt:' $(BUILD)/configure.log || true

build: configure
	@MAKEFLAGS=--no-print-directory cmake --build $(BUILD) -j $(JOBS)

demo: deps-demo configure
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
# The long randomized trials (label `stress`) run with `make stress`. A
# build without the tests (no cmocka) is a failure, not an empty pass.
CTEST = ctest --output-on-failure --no-tests=error -j $(JOBS)
test: deps-test build test-peers
	@cd $(BUILD) && $(CTEST) -LE stress
	@$(MAKE) --no-print-directory test-asan

test-fast: build
	@cd $(BUILD) && $(CTEST) -LE stress

stress: deps-test build
	@cd $(BUILD) && $(CTEST) -L stress

test-asan:
	@$(call configure_in,$(ASAN),-DCKPT_SANITIZE=address -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@MAKEFLAGS=--no-print-directory cmake --build $(ASAN) -j $(JOBS)
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(CTEST) -LE 'nosan|stress'

# The tests that run libckpt's threads (label `threads`) under
# ThreadSanitizer; only they are built. TSAN_OPTIONS (suppressions:
# tests/tsan.supp) come from the tests' environment (tests/CMakeLists.txt).
test-tsan:
	@$(call configure_in,$(TSAN),-DCKPT_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@MAKEFLAGS=--no-print-directory cmake --build $(TSAN) -j $(JOBS) --target threads_tests
	@cd $(TSAN) && $(CTEST) -L threads

# Compile-only builds for CI (.ci/run): everything with clang, a build
# with the object stores (and CUDA) compiled out, and a Release build (-O3:
# gcc's flow warnings, such as maybe-uninitialized, differ from -O2's).
# Warnings are errors in all three.
build-clang:
	@$(call configure_in,build-clang,-DCMAKE_C_COMPILER=clang -DCKPT_WERROR=ON)
	@MAKEFLAGS=--no-print-directory cmake --build build-clang -j $(JOBS)

build-nostores:
	@$(call configure_in,build-nostores,-DCKPT_WITH_S3=OFF -DCKPT_WITH_AZURE=OFF -DCKPT_WITH_CUDA=OFF -DCKPT_WERROR=ON)
	@MAKEFLAGS=--no-print-directory cmake --build build-nostores -j $(JOBS)

build-release:
	@$(call configure_in,build-release,-DCMAKE_BUILD_TYPE=Release -DCKPT_WERROR=ON)
	@MAKEFLAGS=--no-print-directory cmake --build build-release -j $(JOBS)

bench: deps-bench build test-peers
	@bash bench/run.sh $(BUILD)

# ckptrun, the libraries, ckpt.h, ckpt.pc, the CMake package, the manual
# page and the bash/zsh completions: only what is installed is built
# (target `installable`, CMakeLists.txt), not the tests, fuzzers, benchmarks
# or examples.
install: configure
	@MAKEFLAGS=--no-print-directory cmake --build $(BUILD) -j $(JOBS) --target installable
	@cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) build-clang build-nostores build-release
