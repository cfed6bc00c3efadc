#!/usr/bin/env bash
# make bench: the device snapshot benchmark, when built (CUDA detected).
# Without a GPU it prints why and is skipped.
set -uo pipefail
build=${1:-build}
[[ -x "$build/bin/cuda_bench" ]] || { echo "cuda_bench not built (no CUDA toolkit)"; exit 0; }
"$build/bin/cuda_bench"
rc=$?
(( rc == 77 )) && exit 0
exit $rc
