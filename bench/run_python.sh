#!/usr/bin/env bash
# `import ckpt` against torch.save / torch.load / aws s3 cp (bench/py_bench.py):
# 1 GiB of bf16 weights and fp32 AdamW moments (BENCH_PY_MB), best of 5
# (BENCH_PY_REPS), on the local disk (BENCH_DIR, default /var/tmp: not
# tmpfs) and on s3rver (tests/npm; skipped without it).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
if ! /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  echo "python bench: /usr/bin/python3 has no torch: skipped"; exit 0
fi
if [[ ! -f "$build/python/ckpt/__init__.py" ]]; then
  echo "python bench: $build/python/ckpt missing (cmake --build $build): skipped"; exit 0
fi
exec /usr/bin/python3 "$src/bench/py_bench.py" --build "$build"
