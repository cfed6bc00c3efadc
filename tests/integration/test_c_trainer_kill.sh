#!/usr/bin/env bash
# The C trainer killed with SIGKILL at arbitrary moments and restarted until
# done produces the same final parameters as an uninterrupted run.
set -euo pipefail
bin=${CKPT_BIN}/c_trainer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# sleeping 5 ms a step makes the run at least 1.5 s long whatever the load,
# so random kills land mid-run
args=(--steps 300 --every 7 --hidden 1024 --quiet --sleep-ms 5)
t0=$(date +%s%N)
CKPT_STORE="file://$work/store" CKPT_RUN=clean "$bin" "${args[@]}" --out "$work/clean.bin" > /dev/null
# kill at random points within the first 60% of an uninterrupted run's time,
# so slow builds (sanitizers) are killed mid-run as often as fast ones
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kills=0
for ((attempt = 0; attempt < 100; attempt++)); do
  CKPT_STORE="file://$work/store" CKPT_RUN=killed "$bin" "${args[@]}" \
    --out "$work/killed.bin" > "$work/log" 2>&1 &
  pid=$!
  # the first kills come early (well before the end whatever the load), later
  # ones anywhere: at least three kills, then let it finish
  if (( kills < 3 )); then d=$(( 100 + RANDOM % (ms / 5 + 1) )); else d=$(( RANDOM % (ms + 1) )); fi
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
