#!/usr/bin/env bash
# make bench: every benchmark, each printing its table.
set -euo pipefail
build=${1:-build}
echo "== libckpt vs zstd / lz4 / memcpy"
"$build/bin/ckpt_bench" "${@:2}"
for b in bench/run_*.sh; do
  [[ -e "$b" ]] || continue
  echo; echo "== $(basename "$b" .sh)"
  bash "$b" "$build"
done
