#!/usr/bin/env bash
# Saves and gc of one run in two processes at once, SIGKILLed at random
# instants (the saver, the gc, or both): every commit the saver reported
# must stay restorable, every retained checkpoint must verify, and a gc run
# to the end afterwards must keep it so. CKPT_GC_TRIALS trials (50 in
# `make test`, 250 under the stress label).
set -euo pipefail
TRIALS=${CKPT_GC_TRIALS:-50}
bin=${CKPT_BUILD}/tests/save_victim
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
store="file://$work/store"
last=0
ms() { printf '0.%03d' $(( $1 % 1000 )); }
for ((i = 1; i <= TRIALS; i++)); do
  case $((RANDOM % 3)) in 0) age=0 ;; 1) age=200 ;; *) age=900000 ;; esac
  "$bin" write "$store" victim --tolerant > "$work/out" 2> "$work/werr" &
  wpid=$!
  "$bin" gc "$store" victim "$age" > "$work/gout" 2> "$work/gerr" &
  gpid=$!
  pids=("$wpid" "$gpid")
  sleep "$(ms $((RANDOM % 600)))"
  case $((RANDOM % 3)) in
    0) kill -9 "$wpid" 2>/dev/null || true ;;
    1) kill -9 "$gpid" 2>/dev/null || true ;;
    *) kill -9 "$wpid" "$gpid" 2>/dev/null || true ;;
  esac
  sleep "$(ms $((RANDOM % 300)))"
  kill -9 "$wpid" "$gpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
  wait "$gpid" 2>/dev/null || true
  pids=()
  if grep -q "^gc: " "$work/gerr"; then
    echo "trial $i: gc failed:"; cat "$work/gerr"; exit 1
  fi
  committed=$(tail -n 1 "$work/out" || true)
  [[ -n "$committed" ]] && (( committed > last )) && last=$committed
  got=$("$bin" check "$store" victim "$last" 2> "$work/cerr") || {
    echo "trial $i (min-age ${age} ms): last reported commit $last lost or damaged"
    cat "$work/cerr"; echo "saver:"; tail -n 5 "$work/werr"; echo "gc:"; tail -n 3 "$work/gout"
    exit 1; }
  [[ "$got" == none ]] || last=$got
done
# a gc that runs to its end after all that (records of killed ones included)
"$bin" gc "$store" victim 0 > "$work/gout" 2> "$work/gerr" &
gpid=$!
pids=("$gpid")
for _ in $(seq 1 300); do
  grep -q "^gc success" "$work/gout" 2>/dev/null && break
  sleep 0.1
done
kill -9 "$gpid" 2>/dev/null || true
wait "$gpid" 2>/dev/null || true
grep -q "^gc success" "$work/gout" || { echo "final gc did not finish"; cat "$work/gerr"; exit 1; }
"$bin" check "$store" victim "$last" > /dev/null || { echo "final gc broke step $last"; exit 1; }
echo "$TRIALS save+gc kill trials: every reported commit stayed restorable (reached step $last)"
