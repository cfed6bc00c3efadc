#!/usr/bin/env bash
# Two ckptruns of one job on loopback: the time from a stop on one node to
# the global commit and to both nodes' exit (docs/multirank.md).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
exec python3 "$(dirname "$0")/nodes_bench.py" "$build" --rounds "${BENCH_NODES_ROUNDS:-3}"
