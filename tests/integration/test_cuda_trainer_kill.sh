#!/usr/bin/env bash
# The CUDA trainer (weights and Adam state in device memory) killed with
# SIGKILL at arbitrary moments and restarted until done produces the same
# final parameters as an uninterrupted run. Exits 77 (skipped) without a GPU.
set -euo pipefail
bin=${CKPT_BIN}/cuda_trainer
[[ -x "$bin" ]] || { echo "SKIP: $bin not built (no CUDA toolkit at configure time)"; exit 77; }
rc=0
why=$("$bin" --check-device) || rc=$?
if (( rc == 77 )); then
  echo "SKIP: $why"
  exit 77
elif (( rc != 0 )); then
  echo "$why"; exit "$rc"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--steps 600 --every 7 --hidden 2048 --quiet)
t0=$(date +%s%N)
CKPT_STORE="file://$work/store" CKPT_RUN=clean "$bin" "${args[@]}" --sleep-ms 5 --out "$work/clean.bin" > /dev/null
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
# a second uninterrupted run in another run: bit-reproducibility itself
CKPT_STORE="file://$work/store" CKPT_RUN=clean2 "$bin" "${args[@]}" --out "$work/clean2.bin" > /dev/null
cmp "$work/clean.bin" "$work/clean2.bin" || { echo "two uninterrupted runs differ: the trainer is not deterministic"; exit 1; }
# Kill at random points within the first 35% of an uninterrupted run's time
# (which includes CUDA start-up, so some kills land before any progress);
# after 30 attempts let the run finish, so a slow start-up cannot loop forever.
kills=0
for ((attempt = 0; attempt < 31; attempt++)); do
  CKPT_STORE="file://$work/store" CKPT_RUN=killed "$bin" "${args[@]}" --sleep-ms 5 \
    --out "$work/killed.bin" >> "$work/log" 2>&1 &
  pid=$!
  if (( attempt == 30 )); then
    wait "$pid"
    break
  fi
  d=$(( ms / 20 + RANDOM % (ms * 3 / 10 + 1) ))
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
grep -q "resumed from step" "$work/log" || { echo "no run ever resumed"; cat "$work/log"; exit 1; }
cmp "$work/clean.bin" "$work/killed.bin"
echo "killed $kills times; final device parameters byte-identical to the uninterrupted run"
(( kills >= 3 )) || { echo "too few kills to mean anything"; exit 1; }
