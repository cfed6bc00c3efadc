#!/bin/bash
# test_notice_ckptrun.sh CKPTRUN MOCK_SCRIPT -- ckptrun stops on a cloud notice.
#
# For AWS and Azure: a child commits one checkpoint by rename, then the mock
# serves a notice; ckptrun must stop the child and exit 75 (resumable) well
# before the deadline, and Azure's event must be acknowledged exactly once,
# after the commit. Loopback only (--metadata-url points at the mock).
set -u
CKPTRUN=$1
MOCK=$2
TMP=$(mktemp -d /tmp/test_notice_ckptrun.XXXXXX)
MOCK_PID=
fail=0

cleanup() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

start_mock() { # provider
    : > "$TMP/mock.out"
    /usr/bin/python3 "$MOCK" --provider "$1" > "$TMP/mock.out" 2>&1 &
    MOCK_PID=$!
    PORT=
    for _ in $(seq 100); do
        PORT=$(awk '/^PORT/{print $2}' "$TMP/mock.out")
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    echo "FAIL: mock $1 did not start"; return 1
}

stop_mock() {
    kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null; MOCK_PID=
}

ctl() { curl -s --noproxy '*' -X POST "http://127.0.0.1:$PORT/_mock/$1"; }

run_case() { # provider [notice mode]
    local p=$1 mode=${2:-$1} t0 t1 rc
    local dir="$TMP/$p-$mode-dir" store="file://$TMP/$p-$mode-store"
    mkdir -p "$dir"
    start_mock "$p" || { fail=1; return; }
    rm -f "$TMP/$p.log"
    # The notice comes once the child's checkpoint-7 is committed (its
    # commit event in the log; 30 s at most).
    ( for _ in $(seq 600); do
          grep -q ' commit .*step=7' "$TMP/$p.log" 2>/dev/null && break
          sleep 0.05
      done
      ctl "notice?kind=terminate&in=60" > /dev/null ) &
    local notifier=$!
    t0=$(date +%s)
    timeout 60 "$CKPTRUN" run --store "$store" --run "r-$p" --dir "$dir" --notice "$mode" \
        --metadata-url "http://127.0.0.1:$PORT" -- \
        sh -c 'echo x > "$CKPT_DIR/c.tmp"; mv "$CKPT_DIR/c.tmp" "$CKPT_DIR/checkpoint-7"; exec sleep 300' \
        > "$TMP/$p.log" 2>&1
    rc=$?
    t1=$(date +%s)
    wait "$notifier"
    if [ "$rc" != 75 ]; then
        echo "FAIL $p: exit $rc, want 75"; cat "$TMP/$p.log"; fail=1
    fi
    if [ $((t1 - t0)) -gt 30 ]; then
        echo "FAIL $p: took $((t1 - t0)) s"; fail=1
    fi
    grep -q 'notice.*provider='"$p" "$TMP/$p.log" || { echo "FAIL $p: no notice event logged"; fail=1; }
    if [ "$p" = azure ]; then
        acks=$(ctl state | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["acks"]))')
        [ "$acks" = 1 ] || { echo "FAIL azure: $acks acknowledgements, want 1"; fail=1; }
    fi
    stop_mock
    echo "$p ($mode): exit $rc in $((t1 - t0)) s"
}

run_case aws
run_case azure
# --notice auto: DMI (a fake directory) names the provider
mkdir -p "$TMP/dmi"
echo "Amazon EC2" > "$TMP/dmi/sys_vendor"
echo "m5.large" > "$TMP/dmi/product_name"
CKPT_DMI_DIR="$TMP/dmi" run_case aws auto
exit $fail
