#!/usr/bin/env bash
# ckptrun's cost to a trainer, and how fast a stop becomes a commit:
#  1. c_trainer steps/s alone vs under ckptrun with a checkpoint every 3 s
#     (requests over the control socket; target: <= 3% slower);
#  2. SIGTERM to exit 75 with a ~1 GiB state (params + Adam moments) on the
#     file store.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
bin="$build/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CKPT_STORE="file://$work/store"
steps=${BENCH_STEPS:-2400}
tr=("$bin/c_trainer" --steps "$steps" --every 0 --quiet --hidden 4096)

secs() { local t0 t1; t0=$(date +%s%N); "$@" > /dev/null 2>&1; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }

# long runs, so ckptrun's fixed start-up (store, restore check, spawn) is
# amortised as it is in a real training run; alternate to spread drift
alone=0 under=0
for i in 1; do
  a=$(CKPT_RUN=alone$i secs "${tr[@]}" --out "$work/a$i.bin")
  u=$(cd "$work" && CKPT_RUN=under$i secs "$bin/ckptrun" --run under$i --interval 3s -q -- "${tr[@]}" --out "$work/u$i.bin")
  alone=$((alone + a)); under=$((under + u))
done
commits=$("$bin/ckptrun" ls --run under1 --json 2>/dev/null | grep -o '"step"' | wc -l || true)

# ~1 GiB state: 256 x 349525 floats of parameters, twice more for Adam
big=("$bin/c_trainer" --steps 1000000 --every 0 --quiet --hidden 349525)
(cd "$work" && exec "$bin/ckptrun" --run big --grace 60s -q -- "${big[@]}" --out "$work/big.bin") &
pid=$!
sleep "${BENCH_BIG_WARMUP:-8}"
t0=$(date +%s%N)
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
t1=$(date +%s%N)
stop_ms=$(( (t1 - t0) / 1000000 ))
raw=$("$bin/ckptrun" ls --run big --json | grep -o '"raw_bytes":[[:space:]]*[0-9]*' | head -1 | grep -o '[0-9]*$' || echo 0)

printf '\n| %-46s | %-12s | %-14s | %-7s | %-8s |\n' measure ckptrun peer ratio target
printf '|------------------------------------------------|--------------|----------------|---------|----------|\n'
printf '| %-46s | %8.2f st/s | %8.2f st/s | %6.3fx | %-8s |\n' \
  "c_trainer under ckptrun, checkpoint every 3 s" \
  "$(echo "scale=2; $steps * 1000 / $under" | bc)" "$(echo "scale=2; $steps * 1000 / $alone" | bc)" \
  "$(echo "scale=3; $alone / $under" | bc)" ">= 0.97x"
printf '| %-46s | %9d ms | %-14s | %-7s | %-8s |\n' \
  "SIGTERM to exit $rc, $((raw / 1000000)) MB state, file store" "$stop_ms" "-" "-" "< grace"
echo
echo "peer for steps/s: the same trainer alone, no checkpoints; ${commits:-?} checkpoints retained under ckptrun"
