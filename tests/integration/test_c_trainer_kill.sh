#!/usr/bin/env bash
# The C trainer killed with SIGKILL at arbitrary moments and restarted until
# done produces the same final parameters as an uninterrupted run.
set -euo pipefail
bin=${CKPT_BIN}/c_trainer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--steps 300 --every 7 --hidden 1024 --quiet)
t0=$(date +%s%N)
CKPT_STORE="file://$work/store" CKPT_RUN=clean "$bin" "${args[@]}" --sleep-ms 2 --out "$work/clean.bin" > /dev/null
# kill at random points within the first 60% of an uninterrupted run's time,
# so slow builds (sanitizers) are killed mid-run as often as fast ones
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kills=0
for ((attempt = 0; attempt < 100; attempt++)); do
  CKPT_STORE="file://$work/store" CKPT_RUN=killed "$bin" "${args[@]}" --sleep-ms 2 \
    --out "$work/killed.bin" > "$work/log" 2>&1 &
  pid=$!
  d=$(( ms / 10 + RANDOM % (ms / 2 + 1) ))
  sleep "$((d / 1000)).$(printf '%03d' $((d % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    kills=$((kills + 1))
  else
    wait "$pid"
    break
  fi
done
[[ -f "$work/killed.bin" ]] || { echo "never finished"; cat "$work/log"; exit 1; }
cmp "$work/clean.bin" "$work/killed.bin"
echo "killed $kills times; final parameters byte-identical to the uninterrupted run"
(( kills >= 3 )) || { echo "too few kills to mean anything"; exit 1; }
