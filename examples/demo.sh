#!/usr/bin/env bash
# make demo: a real preempt-and-resume on the default file:// store.
#
# 1. train the C trainer uninterrupted (the reference);
# 2. train it again and kill it with SIGKILL mid-run (a reclaimed instance);
# 3. start it again: it resumes from its last committed checkpoint;
# 4. compare: the final parameters are byte-identical to the reference.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
store_dir="${XDG_DATA_HOME:-$HOME/.local/share}/ckpt"
export CKPT_STORE="file://$store_dir"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=400 every=25
args=(--steps $steps --every $every --hidden 2048 --quiet)
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

rm -rf "$store_dir/ckpt-demo" "$store_dir/ckpt-demo-ref"

say "1. reference: $steps steps uninterrupted (run ckpt-demo-ref)"
t0=$(date +%s.%N)
CKPT_RUN=ckpt-demo-ref "$bin/c_trainer" "${args[@]}" --out "$out/ref.bin"
t1=$(date +%s.%N)
secs=$(echo "$t1 - $t0" | bc 2>/dev/null || echo 2)

say "2. the same training, killed with SIGKILL part-way (run ckpt-demo)"
CKPT_RUN=ckpt-demo "$bin/c_trainer" "${args[@]}" --sleep-ms 5 --out "$out/demo.bin" &
pid=$!
sleep 2.5
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
echo "killed pid $pid (no chance to save anything on the way out)"
if [[ -x "$bin/ckptrun" ]]; then
  echo "committed checkpoints:"; "$bin/ckptrun" ls --run ckpt-demo || true
fi

say "3. start again: it resumes from the newest committed checkpoint"
CKPT_RUN=ckpt-demo "$bin/c_trainer" "${args[@]}" --out "$out/demo.bin"

say "4. compare with the uninterrupted run"
if cmp -s "$out/ref.bin" "$out/demo.bin"; then
  echo "IDENTICAL: $(stat -c %s "$out/demo.bin") bytes of parameters match the uninterrupted run"
else
  echo "DIFFERENT: resume is broken"; exit 1
fi
echo
echo "Checkpoints live in $store_dir (runs ckpt-demo, ckpt-demo-ref)."
echo "Next: README.md, 'Three ways in'."
