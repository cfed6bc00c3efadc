#!/usr/bin/env bash
# Notice -> durable, restore and recover on an emulated cloud link, against
# curl and aws s3 cp over the same link in the same run; and doctor's
# estimate of it. One table per profile of bench/link_profiles.
#
# The link (tests/tools/link.sh): s3rver in a network namespace behind a
# veth pair shaped by tc tbf (total rate) and tests/tools/linkproxy (round
# trip, cap per connection), on 127.0.0.1. Needs root: skipped (with the
# reason) otherwise.
#
# Per profile, BENCH_LINK_ROUNDS rounds (default 2), the tools alternating
# inside each round:
#  1. ckptrun run (--notice aws, the metadata mock on loopback) of
#     examples/c_trainer --bf16 with a BENCH_LINK_MB (1024) MiB state
#     (fp32 master weights, bf16 weights, two fp32 Adam moments); once it
#     has trained a few steps the mock raises a notice; notice -> durable is
#     from ckptrun's `notice` log line to its `commit` line (HEAD durable).
#  2. the stored objects (the checkpoint's packs) uploaded by 8 parallel
#     `curl -T` (curl -Z --parallel-max 8): R, the rate the link gives them;
#  3. `aws s3 cp` of the raw state (one file, the items end to end);
#  4. `ckptrun restore` of the checkpoint, and `ckptrun recover` of the run
#     (the trainer restores itself and exits: lease, start and restore);
#  5. the stored objects downloaded by 8 parallel `curl -o`.
# Then `ckptrun doctor` with the state's size and this link, once.
# Each figure is the median of its rounds.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin"
export CKPT_BUILD="$build"
# shellcheck source=../tests/tools/link.sh
source "$src/tests/tools/link.sh"
mb=${BENCH_LINK_MB:-1024}
rounds=${BENCH_LINK_ROUNDS:-2}
only=${BENCH_LINK_PROFILES:-}
warmup=${BENCH_LINK_WARMUP:-3}
if ! link_check; then
  echo "link bench: skipped: $LINK_WHY"; exit 0
fi
for t in /usr/bin/time "$build/tests/linkproxy" "$bin/c_trainer" "$bin/ckptrun"; do
  [[ -x "$t" ]] || { echo "link bench: $t missing: skipped"; exit 0; }
done
aws_bin=/usr/bin/aws
[[ -x "$aws_bin" ]] || aws_bin=$(command -v aws || true)
# the Python package's trainer (import ckpt), with Debian's torch
py=/usr/bin/python3
if [[ ! -d "$build/python/ckpt" ]] || ! "$py" -c 'import torch' 2> /dev/null; then
  echo "link bench: no import ckpt ($build/python) or no torch: the Python trainer's rows skipped"
  py=""
fi

top=$(mktemp -d)
mock_pid=""
cleanup() {
  link_down
  if [[ -n "$mock_pid" ]]; then
    kill "$mock_pid" 2> /dev/null || true
  fi
  wait 2> /dev/null || true
  if [[ -n "${BENCH_LINK_KEEP:-}" ]]; then echo "link bench: kept $top"; else rm -rf "$top"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export HOME="$top/home" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_REGION=us-east-1
export CKPT_S3_CONDITIONAL=0   # s3rver ignores conditional writes (SPEC.md)
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME"

# The metadata service is local on a real instance: the mock stays on
# loopback, off the link.
/usr/bin/python3 "$src/tests/tools/metadata_mock.py" --provider aws > "$top/mock.out" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do
  mport=$(awk '/^PORT/{print $2}' "$top/mock.out")
  [[ -n "$mport" ]] && break
  sleep 0.05
done
mock() { curl -s --noproxy '*' -X POST "http://127.0.0.1:$mport/_mock/$1" > /dev/null; }

# c_trainer --bf16 holds 14 bytes per parameter, (input + 17) x hidden + 16
# parameters at input 256.
hidden=$(( (mb << 20) / 14 / 273 ))
curl_s3=(curl -sf --noproxy '*' --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER
         -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")

# measure FILE CMD...: appends "wall_ms cpu_ms rss_kb" to FILE.
measure() {
  local f=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" > "$work/cmd.log" 2>&1 ||
    { tail -20 "$work/cmd.log"; echo "link bench: $* failed"; return 1; }
  awk '{printf "%d %d %d\n", $1 * 1000, ($2 + $3) * 1000, $4}' "$work/time" >> "$f"
}
# median FILE FIELD
median() { awk -v f="$2" '{print $f}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# One stop on a notice: RUN OUT TRAINER...: ckptrun runs the trainer until
# it trains, a notice comes; appends "notice_to_durable_ms raw stored step
# wait_ms" to OUT, wait_ms: from ckptrun's request to the trainer's save
# (the step in progress).
notice_round() {
  local run=$1 out=$2 log="$work/$1.log" t
  shift 2
  (cd "$work" && exec "$bin/ckptrun" run --log-json --store s3://bench/ckpt --run "$run" \
     --notice aws --metadata-url "http://127.0.0.1:$mport" --grace 300s -- "$@") \
    > "$work/$run.out" 2> "$log" &
  local pid=$!
  for _ in $(seq 2400); do # the state is made, training goes on
    grep -qE 'starting fresh|resumed from' "$work/$run.out" && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.05
  done
  # a few steps, so the Adam moments are dense as in a real run
  sleep "$warmup"
  mock "notice?kind=terminate&in=120"
  t=0; wait "$pid" || t=$?
  mock clear
  [[ $t == 75 ]] || { tail -20 "$log"; echo "link bench: ckptrun exit $t, want 75"; return 1; }
  /usr/bin/python3 - "$log" >> "$out" << 'EOF'
import datetime, json, sys
t = {}
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    ts = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    for k in ("notice", "request", "saving"):
        if e["event"] == k and k not in t:
            t[k] = ts
    if e["event"] == "commit" and "notice" in t and "commit" not in t:
        t["commit"], t["raw"], t["stored"], t["step"] = ts, e["bytes"], e["stored"], e["step"]
        t["save"] = e["seconds"]  # libckpt's: from the snapshot's start to the commit
if "commit" not in t:
    sys.exit("no commit after the notice in " + sys.argv[1])
print(round((t["commit"] - t["notice"]) * 1000), t["raw"], t["stored"], t["step"],
      max(0, round((t["commit"] - t.get("request", t["notice"]) - t["save"]) * 1000)))
EOF
}

# The trainer's step, no store in the way (a file:// store in $top): 4
# steps less 1, over 3, each the best of two runs (the first run of a
# process this size also pays for the VM's first use of its memory);
# doctor's input for the wait a notice has.
trainer_times() {
  local a=999999999 b=999999999 t0 t
  for n in 1 4 1 4; do
    t0=$(date +%s%N)
    "$bin/c_trainer" --steps "$n" --every 0 --quiet --bf16 --batch 1 --hidden "$hidden" \
      --store "file://$top/init" --run "s$n" --out "$top/init.bin" > /dev/null
    t=$(( ($(date +%s%N) - t0) / 1000000 ))
    if [[ $n == 1 ]]; then (( t < a )) && a=$t; else (( t < b )) && b=$t; fi
    rm -rf "$top/init"
  done
  step_ms=$(( (b - a) / 3 ))
  (( step_ms > 0 )) || step_ms=1
  rm -rf "$top/init" "$top/init.bin"
}

# The stored objects of a run: its packs, as s3rver keeps them.
objects() { find "$LINK_DATA/bench/ckpt/$1/packs" -name '*._S3rver_object' | sort; }

mbs() { echo "scale=1; $1 / 1000 / $2" | bc; } # bytes ms -> MB/s
fmt_s() { echo "scale=2; $1 / 1000" | bc; }

profile() {
  local name=$1 rate=$2 rtt=$3 crate=$4 r
  work="$top/$name"
  mkdir -p "$work"
  link_up "$name" "$rate" "$rtt" "$crate" "$work/link" || { echo "link bench: $LINK_WHY"; return 1; }
  export AWS_ENDPOINT_URL="$LINK_ENDPOINT"
  local t0_proxy; t0_proxy=$(link_proxy_cpu)
  for r in $(seq "$rounds"); do
    local run="n$r" step objs=() up=() down=() f k t
    notice_round "$run" "$work/n2d" "$bin/c_trainer" --steps 100000000 --every 0 --quiet \
      --bf16 --batch 1 --hidden "$hidden" --out "$work/out.bin"
    step=$(tail -1 "$work/n2d" | cut -d' ' -f4)
    mapfile -t objs < <(objects "$run")
    k=0
    for f in "${objs[@]}"; do
      up+=(-T "$f" "$LINK_ENDPOINT/bench/curl$r/o$k")
      down+=(-o "$work/dl/o$k" "$LINK_ENDPOINT/bench/curl$r/o$k")
      k=$((k + 1))
    done
    echo $(( $(stat -c %s "${objs[@]}" | paste -sd+ | bc) )) >> "$work/stored_objs"
    measure "$work/curl_up" "${curl_s3[@]}" -Z --parallel-max 8 "${up[@]}"
    rm -rf "$work/rest"
    measure "$work/restore" "$bin/ckptrun" restore --store s3://bench/ckpt --run "$run" -q \
      "$work/rest"
    if [[ $r == 1 ]]; then # the raw state, one file: what aws s3 cp sends
      cat "$work/rest"/* > "$work/state.bin"
    fi
    rm -rf "$work/rest"
    if [[ -n "$aws_bin" ]]; then
      measure "$work/aws_up" env AWS_EC2_METADATA_DISABLED=true "$aws_bin" --endpoint-url "$LINK_ENDPOINT" s3 cp --only-show-errors \
        "$work/state.bin" "s3://bench/aws/s$r"
    fi
    # recover: from the trainer's connection (its libckpt context is open:
    # then protect, restore) to its resume; the lease and the trainer's
    # own start (its model) come before
    t=$(/usr/bin/python3 "$src/bench/linetime.py" '"event":"connect"' "resumed from" -- \
      "$bin/ckptrun" recover --log-json --store s3://bench/ckpt --run "$run" --notice none -- \
      "$bin/c_trainer" --steps "$step" --every 0 --quiet --bf16 --batch 1 --hidden "$hidden" \
      --out "$work/rec.bin")
    set -- $t
    (( $1 > 0 && $2 > $1 )) || { echo "link bench: recover did not resume ($t)"; return 1; }
    echo "$(( $2 - $1 )) $1" >> "$work/recover"
    mkdir -p "$work/dl"
    measure "$work/curl_down" "${curl_s3[@]}" -Z --parallel-max 8 "${down[@]}"
    rm -rf "$work/dl" "$work/rec.bin"
    if [[ -n "$py" ]]; then
      notice_round "p$r" "$work/n2d_py" "$py" "$src/bench/link_trainer.py" --build "$build" \
        --mb "$mb"
    fi
  done
  local proxy_cpu; proxy_cpu=$(echo "$(link_proxy_cpu) - $t0_proxy" | bc)
  # doctor: the same state size, this link, no notice pending; its inputs
  # the probes cannot know: R (the rate the link gave 8 uploads of these
  # objects) and the trainer's step
  local rbps; rbps=$(( $(median "$work/stored_objs" 1) * 1000 / $(median "$work/curl_up" 1) ))
  CKPT_DOCTOR_UPLOAD_RATE="${rbps}B" CKPT_DOCTOR_STEP="${step_ms}ms" \
    "$bin/ckptrun" doctor --store s3://bench/doc --run d \
    --state-bytes "$(cut -d' ' -f2 "$work/n2d" | head -1)" --notice aws \
    --metadata-url "http://127.0.0.1:$mport" --budget 60s --json \
    > "$work/doctor.json" 2> "$work/doctor.log" || true
  CKPT_DOCTOR_STEP="${step_ms}ms" "$bin/ckptrun" doctor --store s3://bench/doc --run d \
    --state-bytes "$(cut -d' ' -f2 "$work/n2d" | head -1)" --notice aws \
    --metadata-url "http://127.0.0.1:$mport" --budget 60s --json \
    > "$work/doctor_probe.json" 2> "$work/doctor_probe.log" || true
  report "$name" "$rate" "$rtt" "$crate" "$proxy_cpu"
  link_down
}

report() {
  local name=$1 rate=$2 rtt=$3 crate=$4 proxy_cpu=$5
  local n2d raw stored objs up dn aws rest rec est bound1 bound2
  n2d=$(median "$work/n2d" 1); raw=$(median "$work/n2d" 2); stored=$(median "$work/n2d" 3)
  objs=$(median "$work/stored_objs" 1)
  up=$(median "$work/curl_up" 1); dn=$(median "$work/curl_down" 1)
  rest=$(median "$work/restore" 1); rec=$(median "$work/recover" 1)
  # targets: <= 1.1 x stored / R + 0.5 s, R = objs / up
  bound1=$(echo "1.1 * $stored * $up / $objs + 500" | bc)
  echo
  echo "link bench, profile $name: $rate total, ${rtt} ms RTT, per connection $( [[ $crate == 0 ]] && echo 'no cap' || echo "$(( crate / 1000000 )) MB/s" );" \
    "state $(( raw / 1000000 )) MB (c_trainer --bf16), stored $(( stored / 1000000 )) MB" \
    "($(echo "scale=3; $stored / $raw" | bc)), median of $rounds rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf '| %-44s | %-16s | %-44s | %-7s | %-22s |\n' measure ckpt peer ratio target
  printf '|----------------------------------------------|------------------|----------------------------------------------|---------|------------------------|\n'
  printf '| %-44s | %13s s | %-44s | %6.3fx | %-22s |\n' "notice -> durable (HEAD), C trainer" "$(fmt_s "$n2d")" \
    "1.1 x stored / R + 0.5 s = $(fmt_s "$bound1") s (R $(mbs "$objs" "$up") MB/s)" \
    "$(echo "scale=3; $bound1 / $n2d" | bc)" "<= 1.1 x stored/R + 0.5s"
  if [[ -s "$work/n2d_py" ]]; then
    local pn pstored
    pn=$(median "$work/n2d_py" 1); pstored=$(median "$work/n2d_py" 3)
    local pbound; pbound=$(echo "1.1 * $pstored * $up / $objs + 500" | bc)
    printf '| %-44s | %13s s | %-44s | %6.3fx | %-22s |\n' \
      "notice -> durable, Python (import ckpt)" "$(fmt_s "$pn")" \
      "1.1 x $(( pstored / 1000000 )) MB / R + 0.5 s = $(fmt_s "$pbound") s" \
      "$(echo "scale=3; $pbound / $pn" | bc)" "<= 1.1 x stored/R + 0.5s"
  fi
  if [[ -s "$work/aws_up" ]]; then
    aws=$(median "$work/aws_up" 1)
    bound2=$(echo "1.1 * $stored * $aws / $raw" | bc)
    printf '| %-44s | %13s s | %-44s | %6.3fx | %-22s |\n' "notice -> durable vs aws s3 cp of the raw state" \
      "$(fmt_s "$n2d")" "1.1 x stored/raw x $(fmt_s "$aws") s = $(fmt_s "$bound2") s" \
      "$(echo "scale=3; $bound2 / $n2d" | bc)" "<= 1.1 x stored/raw x aws"
  fi
  printf '| %-44s | %8s MB/s | %-44s | %6.3fx | %-22s |\n' "ckptrun restore (stored bytes)" "$(mbs "$stored" "$rest")" \
    "8 x curl -o of the stored objects: $(mbs "$objs" "$dn") MB/s" \
    "$(echo "scale=3; ($stored / $rest) / ($objs / $dn)" | bc)" ">= 0.95x"
  printf '| %-44s | %8s MB/s | %-44s | %6.3fx | %-22s |\n' "ckptrun recover (in the trainer)" "$(mbs "$stored" "$rec")" \
    "8 x curl -o of the stored objects: $(mbs "$objs" "$dn") MB/s" \
    "$(echo "scale=3; ($stored / $rec) / ($objs / $dn)" | bc)" ">= 0.95x"
  # doctor's estimate counts the notice's detection too (AWS: 2 s of
  # polling); the measure starts at ckptrun's notice line, after it
  local f what
  for f in doctor doctor_probe; do
    [[ $f == doctor ]] && what="doctor, upload rate R, step given" ||
      what="doctor, upload rate probed, step given"
    est=$(/usr/bin/python3 -c 'import json,sys
try:
    e = json.load(open(sys.argv[1]))["estimate"]
    print(int((e["full_s"] - e.get("notice_poll_s", 0)) * 1000))
except Exception: print(0)' "$work/$f.json")
    if [[ $est -gt 0 ]]; then
      printf '| %-44s | %13s s | %-44s | %6.3fx | %-22s |\n' "$what" "$(fmt_s "$est")" \
        "measured notice -> durable: $(fmt_s "$n2d") s" "$(echo "scale=3; $est / $n2d" | bc)" \
        "0.75x - 1.25x"
    else
      echo "$what: no estimate: $(tail -3 "$work/$f.log")"
    fi
  done
  echo "notice -> durable, C trainer: $(fmt_s "$(median "$work/n2d" 5)") s of it waiting for the step in progress (a step: $(fmt_s "$step_ms") s)"
  echo "recover: from the trainer's libckpt connection (protect, restore) to its resume; before it $(fmt_s "$(median "$work/recover" 2)") s of lease and the trainer's own start"
  echo "linkproxy: $proxy_cpu CPU s for the whole profile (not the bottleneck while well under one core)"
  echo "each round (wall ms, client CPU ms, peak RSS KiB):"
  for f in n2d n2d_py curl_up aws_up restore recover curl_down; do
    [[ -f "$work/$f" ]] && echo "  $f: $(tr '\n' ';' < "$work/$f")"
  done
  return 0
}

trainer_times
while read -r name rate rtt crate _; do
  [[ -z "$name" || $name == \#* ]] && continue
  [[ -n "$only" && " $only " != *" $name "* ]] && continue
  profile "$name" "$rate" "$rtt" "$crate"
done < "$src/bench/link_profiles"

