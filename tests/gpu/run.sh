#!/usr/bin/env bash
# The GPU check, in one script (a few minutes on a GPU machine):
#   1. configure and build with CUDA (fails if CUDA is not detected),
#   2. every ctest labelled `cuda` (device-region unit tests, the host-only
#      no-runtime test, the cuda_trainer kill-and-resume check); a skipped
#      test counts as a failure here, since this script is meant for a GPU,
#   3. the device benchmark (bench/cuda_bench.c).
# Results go to $OUT/gpu-results.txt when OUT is set, else
# <build>/gpu-results.txt. Exit status 0 only if every step passed.
#
#   tests/gpu/run.sh                 # build in build-gpu/
#   BUILD=dir CUDA_ARCHS=90 tests/gpu/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${BUILD:-build-gpu}
mkdir -p "$build"
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  results=$OUT/gpu-results.txt
else
  results=$build/gpu-results.txt
fi
jobs=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
result() { # name rc
  if [[ $2 == 0 ]]; then echo "RESULT $1: PASS"; else echo "RESULT $1: FAIL ($2)"; status=1; fi
}

main() {
step "machine"
date -u
uname -srm
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
command -v nvcc > /dev/null && nvcc --version | tail -1
git log -1 --oneline 2>/dev/null || true

step "configure + build ($build)"
archs=()
[[ -n "${CUDA_ARCHS:-}" ]] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
timeout 120 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCKPT_WITH_CUDA=ON \
  "${archs[@]}" > "$build/configure.log" 2>&1
rc=$?
grep -E '^-- ckpt:' "$build/configure.log"
if (( rc == 0 )) && ! grep -q 'device regions enabled' "$build/configure.log"; then
  echo "CUDA was not detected: nothing to check"
  rc=2
fi
(( rc == 0 )) || tail -30 "$build/configure.log"
result configure $rc
if (( rc == 0 )); then
  timeout 240 cmake --build "$build" -j "$jobs" > "$build/build.log" 2>&1
  rc=$?
  (( rc == 0 )) || tail -40 "$build/build.log"
  result build $rc
fi
if (( status != 0 )); then
  echo "OVERALL: FAIL (build)"
  return 1
fi

step "ctest -L cuda"
(cd "$build" && timeout 420 ctest -L cuda --no-tests=error --output-on-failure -V) > "$build/ctest-cuda.log" 2>&1
rc=$?
grep -E '^[0-9]+: (SKIP|\[ *(OK|FAILED|PASSED|SKIPPED) *\])|killed [0-9]+ times|Test +#' "$build/ctest-cuda.log"
if (( rc == 0 )) && grep -q 'Skipped' "$build/ctest-cuda.log"; then
  echo "some cuda tests were skipped (no usable GPU?): see $build/ctest-cuda.log"
  rc=3
fi
(( rc == 0 )) || tail -60 "$build/ctest-cuda.log"
result ctest-cuda $rc

step "cuda_bench"
timeout 150 "$build/bin/cuda_bench" --mib "${BENCH_MIB:-1024}"
rc=$?
result cuda_bench $rc

step "cuda_bench, one copy thread (CKPT_CUDA_COPY_THREADS=1, for comparison)"
CKPT_CUDA_COPY_THREADS=1 timeout 150 "$build/bin/cuda_bench" --mib "${BENCH_MIB:-1024}"
rc=$?
result cuda_bench_1thread $rc

echo
if (( status == 0 )); then echo "OVERALL: PASS"; else echo "OVERALL: FAIL"; fi
return $status
}

# everything, stdout and stderr, also goes to the results file
main 2>&1 | tee "$results"
exit "${PIPESTATUS[0]}"
