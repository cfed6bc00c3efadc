#!/usr/bin/env bash
# The LD_PRELOAD shim's cost for files outside CKPT_DIR (target: <= 5%).
set -euo pipefail
build=${1:-build}
"$build/bin/preload_bench" --so "$build/lib/libckpt_preload.so" --reps 15
