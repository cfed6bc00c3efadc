#!/usr/bin/env bash
# make demo: a real preempt-and-resume on the default file:// store.
#
# 1. the C trainer, uninterrupted: the reference result;
# 2. the same training under ckptrun, preempted with SIGTERM (what
#    Kubernetes, systemd and a spot shutdown send): ckptrun asks the trainer
#    for a checkpoint over its control socket, commits it, stops the trainer
#    and exits 75, "preempted, resumable";
# 3. resumed under ckptrun, then killed with SIGKILL (a reclaimed instance
#    that gives no warning at all);
# 4. "a new machine" (fresh HOME and CKPT_DIR, same store) runs
#    `ckptrun recover` every second, as cron would: the dead runner's lease
#    names a process of this host that is gone, so it takes the run over at
#    once (from another machine it would wait for the lease to expire) and
#    trains to completion;
# 5. the final parameters are byte-identical to the reference.
set -euo pipefail
build=${1:-build}
bin="$(cd "$build/bin" && pwd)"
store_dir="${XDG_DATA_HOME:-$HOME/.local/share}/ckpt"
export CKPT_STORE="file://$store_dir"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trainer=("$bin/c_trainer" --steps 400 --every 50 --hidden 2048 --quiet --sleep-ms 5)
# Bold headings on a terminal only, and never with NO_COLOR (no-color.org):
# `make demo > file` stays plain text.
if [[ -t 1 && -z "${NO_COLOR:-}" && "${TERM:-}" != dumb ]]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

rm -rf "$store_dir/ckpt-demo" "$store_dir/ckpt-demo-ref"

say "1. reference: 400 steps, uninterrupted (run ckpt-demo-ref)"
CKPT_RUN=ckpt-demo-ref "${trainer[@]}" --out "$out/ref.bin"

say "2. under ckptrun, preempted with SIGTERM after 2 s (run ckpt-demo)"
(cd "$out" && exec "$bin/ckptrun" --run ckpt-demo --grace 20s -- "${trainer[@]}" --out "$out/demo.bin") &
pid=$!
sleep 2
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
echo "ckptrun exited $rc (75 = preempted, final checkpoint committed, resumable)"
[[ $rc == 75 ]] || { echo "expected 75"; exit 1; }
"$bin/ckptrun" ls --run ckpt-demo

say "3. resumed under ckptrun, then killed with SIGKILL (no warning at all)"
(cd "$out" && exec "$bin/ckptrun" --run ckpt-demo --lease 4s -- "${trainer[@]}" --out "$out/demo.bin") &
pid=$!
sleep 1.5
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
echo "ckptrun and its trainer were SIGKILLed (the trainer dies with its supervisor)"

say "4. a new machine (fresh HOME and CKPT_DIR, same store): 'ckptrun recover' every second, as cron would"
mkdir -p "$out/newhome"
for i in $(seq 30); do
  (cd "$out" && HOME="$out/newhome" CKPT_DIR="$out/newhome/checkpoints" \
    "$bin/ckptrun" recover --run ckpt-demo --lease 4s -- "${trainer[@]}" --out "$out/demo.bin") || true
  [[ -f "$out/demo.bin" ]] && break
  sleep 1
done
echo "and once more, as the next cron tick would:"
"$bin/ckptrun" recover --run ckpt-demo -- false
"$bin/ckptrun" status --run ckpt-demo | head -20

say "5. compare with the uninterrupted run"
if cmp -s "$out/ref.bin" "$out/demo.bin"; then
  echo "IDENTICAL: $(stat -c %s "$out/demo.bin") bytes of parameters match the uninterrupted run"
else
  echo "DIFFERENT: resume is broken"; exit 1
fi
echo
echo "Checkpoints live in $store_dir (runs ckpt-demo, ckpt-demo-ref)."
echo "Try: $bin/ckptrun ls --run ckpt-demo; $bin/ckptrun verify --run ckpt-demo"
