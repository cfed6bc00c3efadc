#!/bin/bash
# test_link.sh -- checkpoints across a slow, distant link (tests/tools/link.sh:
# s3rver in a network namespace behind 16 Mbit/s, 40 ms, 1 MB/s a
# connection), driven through the real binaries:
#  A. a preemption notice with a 40 s deadline: ckptrun's final commit of a
#     c_trainer --bf16 state (~4 MB) lands before the deadline (exit 75,
#     final committed); `verify` across the link passes, `restore` across it
#     writes every item, and `recover` across it resumes the trainer, which
#     ends byte-identical to an uninterrupted run of the same steps;
#  B. a notice whose deadline leaves ~3 s for a 16 MB state (8 s of link):
#     the final save cannot commit and does not (exit 74: no final
#     checkpoint) -- the run keeps the step committed before, which verifies
#     and resumes byte-identical.
# Needs root for the network namespace: exit 77 (ctest: skipped) with the
# reason otherwise. Loopback and the namespace's own addresses only.
set -u
SRC=${CKPT_SRC:?}
BIN=${CKPT_BIN:?}
export CKPT_BUILD=${CKPT_BUILD:-$(dirname "$BIN")}
# shellcheck source=../tools/link.sh
source "$SRC/tests/tools/link.sh"
if ! link_check; then
    echo "test_link: skipped: $LINK_WHY"
    exit 77
fi
TMP=$(mktemp -d /tmp/test_link.XXXXXX)
MOCK_PID=
fail=0
cleanup() {
    link_down
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    if [ -n "${TEST_LINK_KEEP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

link_up test 16mbit 40 1000000 "$TMP/link" || { echo "FAIL: link: $LINK_WHY"; exit 1; }
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="$LINK_ENDPOINT" CKPT_S3_CONDITIONAL=0
STORE=s3://ckpt-test/link

/usr/bin/python3 "$SRC/tests/tools/metadata_mock.py" --provider aws > "$TMP/mock.out" 2>&1 &
MOCK_PID=$!
PORT=
for _ in $(seq 200); do
    PORT=$(awk '/^PORT/{print $2}' "$TMP/mock.out")
    [ -n "$PORT" ] && break
    sleep 0.05
done
[ -n "$PORT" ] || { echo "FAIL: metadata mock did not start"; exit 1; }
mock() { curl -s --noproxy '*' -X POST "http://127.0.0.1:$PORT/_mock/$1" > /dev/null; }

# trainer ARGS...: c_trainer with a bf16 copy of its weights
trainer() { "$BIN/c_trainer" --every 0 --quiet --bf16 "$@"; }
# json_field FILE EVENT FIELD: the field of the first such event of a log
json_field() {
    /usr/bin/python3 - "$@" << 'EOF'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        e = json.loads(line)
        if e.get("event") == sys.argv[2] and sys.argv[3] in e:
            print(e[sys.argv[3]])
            break
EOF
}
# stop_on_notice RUN IN_S HIDDEN: ckptrun runs the trainer until a notice
# due in IN_S seconds; prints ckptrun's exit code
stop_on_notice() {
    local run=$1 in=$2 hidden=$3 log="$TMP/$1.log" rc=0
    (cd "$TMP" && exec "$BIN/ckptrun" run --log-json --store "$STORE" --run "$run" \
        --notice aws --metadata-url "http://127.0.0.1:$PORT" -- \
        "$BIN/c_trainer" --every 0 --quiet --bf16 --steps 100000000 --hidden "$hidden" \
        --out "$TMP/$run.bin") > "$TMP/$run.out" 2> "$log" &
    local pid=$!
    # the trainer has restored (or started fresh) and trains
    for _ in $(seq 2400); do
        grep -qE 'resumed from step|starting fresh' "$TMP/$run.out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    mock "notice?kind=terminate&in=$in"
    wait "$pid" || rc=$?
    mock clear
    echo "$rc"
}
# same_as_uninterrupted RUN STEPS HIDDEN: recover the run across the link to
# STEPS steps; its weights must equal an uninterrupted local run's
same_as_uninterrupted() {
    local run=$1 steps=$2 hidden=$3
    (cd "$TMP" && "$BIN/ckptrun" recover --store "$STORE" --run "$run" --notice none -q -- \
        "$BIN/c_trainer" --every 0 --quiet --bf16 --steps "$steps" --hidden "$hidden" \
        --out "$TMP/$run.rec") > "$TMP/$run.rec.log" 2>&1 ||
        { echo "FAIL $run: recover across the link failed"; cat "$TMP/$run.rec.log"; fail=1; return; }
    grep -q "resumed from step" "$TMP/$run.rec.log" ||
        { echo "FAIL $run: the trainer did not resume"; cat "$TMP/$run.rec.log"; fail=1; return; }
    trainer --steps "$steps" --hidden "$hidden" --store "file://$TMP/ref-$run" --run ref \
        --out "$TMP/$run.ref" > /dev/null 2>&1 || { echo "FAIL: reference run"; fail=1; return; }
    cmp -s "$TMP/$run.rec" "$TMP/$run.ref" ||
        { echo "FAIL $run: resumed across the link, the weights differ from an uninterrupted run"; fail=1; }
}

# A. the final commit crosses the link inside the deadline
rc=$(stop_on_notice a 40 1024)
committed=$(json_field "$TMP/a.log" final committed)
step=$(json_field "$TMP/a.log" final step)
n_ms=$(/usr/bin/python3 -c '
import datetime, json, sys
t = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        e = json.loads(line)
        if e["event"] in ("notice", "commit") and e["event"] not in t:
            t[e["event"]] = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
print(int((t["commit"] - t["notice"]).total_seconds() * 1000) if len(t) == 2 else -1)' "$TMP/a.log")
if [ "$rc" != 75 ] || [ "$committed" != True ] || [ -z "$step" ]; then
    echo "FAIL A: exit $rc, final committed=$committed step=$step"; cat "$TMP/a.log"; fail=1
elif [ "$n_ms" -lt 0 ] || [ "$n_ms" -gt 35000 ]; then
    echo "FAIL A: notice to commit $n_ms ms, past the deadline's budget (35 s)"; fail=1
else
    echo "A: step $step committed across the link $n_ms ms after the notice (deadline 40 s)"
    "$BIN/ckptrun" verify --store "$STORE" --run a > "$TMP/verify.log" 2>&1 ||
        { echo "FAIL A: verify across the link"; cat "$TMP/verify.log"; fail=1; }
    "$BIN/ckptrun" restore --store "$STORE" --run a -q "$TMP/rest" > "$TMP/rest.log" 2>&1 ||
        { echo "FAIL A: restore across the link"; cat "$TMP/rest.log"; fail=1; }
    for item in params params_bf16 adam_m adam_v rng meta; do
        [ -s "$TMP/rest/$item" ] || { echo "FAIL A: restore wrote no $item"; fail=1; }
    done
    same_as_uninterrupted a $((step + 3)) 1024
fi

# B. a deadline the link cannot meet: the step committed before stays
(cd "$TMP" && "$BIN/ckptrun" run --store "$STORE" --run b --notice none -q -- \
    "$BIN/c_trainer" --every 2 --quiet --bf16 --steps 2 --hidden 4096 --out "$TMP/b0.bin") \
    > "$TMP/b0.log" 2>&1 || { echo "FAIL B: the first run did not commit"; cat "$TMP/b0.log"; fail=1; }
rc=$(stop_on_notice b 8 4096)
committed=$(json_field "$TMP/b.log" final committed)
head_step=$("$BIN/ckptrun" ls --store "$STORE" --run b --json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["step"])')
if [ "$committed" = True ] || [ "$head_step" != 2 ] || [ "$rc" != 74 ]; then
    echo "FAIL B: a 16 MB state across 2 MB/s in 3 s: exit $rc (want 74), final committed=$committed, HEAD step $head_step (want 2)"
    cat "$TMP/b.log"; fail=1
else
    echo "B: final save not committed in its 3 s (exit $rc), HEAD still at step $head_step"
    "$BIN/ckptrun" verify --store "$STORE" --run b > "$TMP/verify.log" 2>&1 ||
        { echo "FAIL B: verify across the link"; cat "$TMP/verify.log"; fail=1; }
    same_as_uninterrupted b 4 4096
fi
echo "linkproxy: $(cat "$TMP/link/proxy.stats" 2>/dev/null)"
exit $fail
