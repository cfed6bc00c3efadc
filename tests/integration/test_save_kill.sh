#!/usr/bin/env bash
# SIGKILL a saving process at random instants, many times: the previous
# committed checkpoint must always restore, exactly, and never go backwards.
set -euo pipefail
TRIALS=${CKPT_KILL_TRIALS:-60}
bin=${CKPT_BUILD}/tests/save_victim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
store="file://$work/store"
last=0
for ((i = 1; i <= TRIALS; i++)); do
  "$bin" write "$store" victim > "$work/out" 2> "$work/err" &
  pid=$!
  # random instant: 0-400 ms, also catching the open and the first save
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  committed=$(tail -n 1 "$work/out" || true)
  [[ -n "$committed" ]] && (( committed > last )) && last=$committed
  got=$("$bin" check "$store" victim "$last") || {
    echo "trial $i: checkpoint not restorable after SIGKILL (last committed $last)"
    cat "$work/err"; exit 1; }
  [[ "$got" == none ]] || last=$got
done
echo "$TRIALS kill trials: every one left a restorable checkpoint (reached step $last)"
