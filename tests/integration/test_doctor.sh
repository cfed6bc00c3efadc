#!/bin/bash
# test_doctor.sh -- `ckptrun doctor` against loopback mocks.
#
#   test_doctor.sh CKPTRUN SOURCE_DIR CASE
#   CASE: providers | badcreds | slow | changed | disk | prereqs | prereqs_s3 | prereqs_azure
#
# providers  each provider through tests/tools/metadata_mock.py with a fake
#            DMI directory (CKPT_DMI_DIR), plus --notice forced, no provider
#            (the mock must see no request), Kubernetes and SLURM windows
# badcreds   tests/tools/mock_s3.py refusing the key: fail line naming the
#            credential source, exit 1 (environment and profile)
# slow       mock_s3.py behind faultproxy.py with a 2 MB/s uplink: the
#            estimate says the checkpoint does not fit, exit 1, and the
#            whole run stays inside --budget; a full checkpoint that does not
#            fit fails unless --changed says little changes; lost work stated
# changed    the changing share measured from a run's own checkpoints
# disk       a 1 MiB tmpfs mounted in a private mount namespace (skipped with
#            a message when that is not allowed), and the documented
#            CKPT_DOCTOR_DISK_FREE override: the disk line fails
# prereqs   every failing prerequisite of the store, driving the real
#           binary: its store path a regular file, an unreadable directory and
#           a read-only one (as an unprivileged user through setpriv when
#           root; skipped with a message where that cannot work); then
#           (prereqs_s3) no credentials, a wrong secret, a closed loopback
#           port and a missing bucket on tests/tools/mock_s3.py, and
#           (prereqs_azure) a wrong account key and a missing container on
#           Azurite, which verifies SharedKey signatures. Each: exit 1 and
#           no crash, the right fail line with what to do, every check that
#           needs it `skip` naming it (JSON "prerequisite"), the summary
#           printed, valid JSON.
# Loopback only. Exit 77 (ctest: skipped) when python3 is missing.
set -u

CKPTRUN=$1
SRC=$2
CASE=$3
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "no python3: skipped"; exit 77; }

TMP=$(mktemp -d)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*"; [ -f "$TMP/out" ] && cat "$TMP/out"; exit 1; }

# Keep the user's cloud configuration out of the test.
export HOME="$TMP/home"
mkdir -p "$HOME"
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3 AWS_CONFIG_FILE \
    AWS_SHARED_CREDENTIALS_FILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION \
    AWS_DEFAULT_REGION AWS_ENDPOINT_URL AZURE_STORAGE_CONNECTION_STRING \
    AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN \
    KUBERNETES_SERVICE_HOST SLURM_JOB_ID CKPT_STORE CKPT_RUN CKPT_DIR CKPT_NOTICE \
    CKPT_INTERVAL CKPT_CODEC 2>/dev/null
export AWS_EC2_METADATA_DISABLED=true
export CKPT_RETRY_BASE_MS=10

# Starts a server that prints "PORT n"; sets PORT and appends to PIDS.
start() {
    local log=$1; shift
    "$@" >"$log" 2>"$log.err" &
    PIDS="$PIDS $!"
    for _ in $(seq 100); do
        grep -q PORT "$log" 2>/dev/null && break
        sleep 0.1
    done
    PORT=$(awk '/PORT/{print $2}' "$log")
    [ -n "$PORT" ] || fail "$* did not start: $(cat "$log.err")"
}

# jq-free assertions on the --json output: python expressions over `j`
# (the object) and `c` (checks by name).
jcheck() {
    "$PY" - "$TMP/out" "$1" <<'EOF' || fail "assertion: $1"
import json, sys
j = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in j["checks"]}
if not eval(sys.argv[2]):
    sys.exit(1)
EOF
}

dmi() { # dmi DIR VENDOR [PRODUCT]
    mkdir -p "$1"
    printf '%s\n' "$2" >"$1/sys_vendor"
    printf '%s\n' "${3:-}" >"$1/product_name"
}

STORE="file://$TMP/store"
doctor() { # doctor EXPECTED_RC ARGS... (output in $TMP/out)
    local want=$1; shift
    "$CKPTRUN" doctor --store "$STORE" --run dtest --json "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$TMP/err"; fail "doctor $* exited $rc, expected $want"; }
}

# prereq NAME FAILED WHAT ARGS...: doctor must exit 1 (not crash) with a
# `fail` line for check FAILED whose advice contains WHAT, every check that
# needs the store skipped naming FAILED, in JSON and in the human form
# (which ends with the summary). Runs doctor through $AS (e.g. setpriv).
prereq() {
    local name=$1 failed=$2 what=$3; shift 3
    local deps="upload download estimate-full estimate-incremental lost-work"
    [ "$failed" = store ] && deps="store-rw conditional $deps"
    [ "$failed" = store-rw ] && deps="conditional $deps"
    $AS "$CKPTRUN" doctor --store "$STORE" --run dtest --json --state-bytes 16MiB \
        --budget 20s --interval 10m "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ $rc = 1 ] || { cat "$TMP/err"; fail "$name: doctor --json exited $rc, expected 1"; }
    jcheck "not j['ok'] and c['$failed']['status'] == 'fail'"
    jcheck "'$what' in c['$failed']['advice']"
    for dep in $deps; do
        jcheck "c['$dep']['status'] == 'skip' and c['$dep']['prerequisite'] == '$failed'"
        jcheck "c['$dep']['message'] == 'not run: $failed failed'"
    done
    # the checks that do not need the store still ran
    jcheck "c['codec']['status'] == 'ok' and c['state']['status'] == 'ok'"
    jcheck "sum(1 for x in j['checks'] if x['status'] == 'fail') == 1"
    $AS "$CKPTRUN" doctor --store "$STORE" --run dtest --state-bytes 16MiB --budget 20s \
        --interval 10m "$@" >"$TMP/human" 2>&1
    rc=$?
    [ $rc = 1 ] || { cat "$TMP/human"; fail "$name: doctor exited $rc, expected 1"; }
    grep -q "^fail  $failed " "$TMP/human" || { cat "$TMP/human"; fail "$name: no fail line"; }
    grep -q "^      .*-> .*$what" "$TMP/human" || { cat "$TMP/human"; fail "$name: no advice"; }
    grep -q "^skip  upload  *not run: $failed failed" "$TMP/human" ||
        { cat "$TMP/human"; fail "$name: upload not skipped"; }
    grep -q "^skip  lost-work  *not run: $failed failed" "$TMP/human" ||
        { cat "$TMP/human"; fail "$name: lost-work not skipped"; }
    grep -q "^doctor: [0-9]* ok, [0-9]* warn, 1 fail, [0-9]* skipped in .*fix the fail lines" \
        "$TMP/human" || { cat "$TMP/human"; fail "$name: no summary"; }
    echo "$name: $(grep "^fail  $failed " "$TMP/human" | tr -s " " | cut -c1-150)"
    echo "    $(echo $deps | wc -w) checks skipped naming it, exit 1"
}
AS=""

case $CASE in
providers)
    export AWS_EC2_METADATA_DISABLED=false   # only loopback mocks are named below
    for p in aws gcp azure aliyun tencent; do
        case $p in
        aws) v="Amazon EC2"; w=120 ;;
        gcp) v="Google"; w=30 ;;
        azure) v="Microsoft Corporation"; prod="Virtual Machine"; w=30 ;;
        aliyun) v="Alibaba Cloud"; w=300 ;;
        tencent) v="Tencent Cloud"; w=120 ;;
        esac
        dmi "$TMP/dmi-$p" "$v" "${prod:-}"
        start "$TMP/md-$p" "$PY" "$SRC/tests/tools/metadata_mock.py" --provider "$p"
        CKPT_DMI_DIR="$TMP/dmi-$p" doctor 0 --metadata-url "http://127.0.0.1:$PORT" \
            --state-bytes 64MiB --budget 20s
        jcheck "j['provider'] == '$p' and c['provider']['status'] == 'ok'"
        jcheck "'DMI sys_vendor \"$v\"' in c['provider']['message']"
        jcheck "c['metadata']['status'] == 'ok' and '127.0.0.1:$PORT' in c['metadata']['message']"
        jcheck "j['estimate']['window_s'] == $w and c['window']['status'] == 'ok'"
        jcheck "c['estimate-full']['status'] == 'ok'"
        if [ $p = aws ]; then
            jcheck "c['imds-token']['status'] == 'ok'"
        fi
        echo "$p: provider, metadata and ${w}s window right"
    done

    # A pending notice shows up as a warning.
    curl -s "http://127.0.0.1:$PORT/_mock/notice?kind=terminate&in=100" >/dev/null 2>&1 ||
        "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1]).read()" \
            "http://127.0.0.1:$PORT/_mock/notice?kind=terminate&in=100"
    CKPT_DMI_DIR="$TMP/dmi-tencent" doctor 0 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 16MiB --budget 20s
    jcheck "c['metadata']['status'] == 'warn' and 'pending' in c['metadata']['message']"
    echo "pending notice: warned"

    # Forced provider, no DMI at all; then an unreachable endpoint fails.
    start "$TMP/md-gcp2" "$PY" "$SRC/tests/tools/metadata_mock.py" --provider gcp
    CKPT_DMI_DIR="$TMP/nodmi" doctor 0 --notice gcp --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 16MiB --budget 20s
    jcheck "j['provider'] == 'gcp' and 'forced by --notice' in c['provider']['message']"
    # A provider DMI never names (Volcano Engine): forced, probed, its window.
    start "$TMP/md-volc" "$PY" "$SRC/tests/tools/metadata_mock.py" --provider volcengine
    CKPT_DMI_DIR="$TMP/nodmi" doctor 0 --notice volcengine --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 16MiB --budget 20s
    jcheck "j['provider'] == 'volcengine' and c['metadata']['status'] == 'ok'"
    jcheck "j['estimate']['window_s'] == 300 and 'Volcano Engine' in c['window']['message']"
    CKPT_DMI_DIR="$TMP/nodmi" doctor 1 --notice aws --metadata-url "http://127.0.0.1:9" \
        --state-bytes 16MiB --budget 20s
    jcheck "c['metadata']['status'] == 'fail' and 'unreachable' in c['metadata']['message']"
    AWS_EC2_METADATA_DISABLED=true CKPT_DMI_DIR="$TMP/dmi-aws" doctor 1 \
        --metadata-url "http://127.0.0.1:$PORT" --state-bytes 16MiB --budget 20s
    jcheck "c['metadata']['status'] == 'fail' and 'AWS_EC2_METADATA_DISABLED' in c['metadata']['message']"
    echo "forced provider: named; unreachable or disabled endpoint: fail"

    # No provider: nothing contacted (the mock counts every request).
    dmi "$TMP/dmi-qemu" "QEMU" "Standard PC"
    before=$("$PY" -c "import json,urllib.request,sys; print(json.load(urllib.request.urlopen(sys.argv[1]))['counters'].get('requests',0))" "http://127.0.0.1:$PORT/_mock/state")
    CKPT_DMI_DIR="$TMP/dmi-qemu" doctor 0 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 16MiB --budget 20s
    after=$("$PY" -c "import json,urllib.request,sys; print(json.load(urllib.request.urlopen(sys.argv[1]))['counters'].get('requests',0))" "http://127.0.0.1:$PORT/_mock/state")
    [ "$before" = "$after" ] || fail "no provider, yet the metadata mock got requests"
    jcheck "j['provider'] == 'none' and c['metadata']['status'] == 'skip'"
    jcheck "c['window']['status'] == 'warn' and '--interval' in c['window']['advice']"
    CKPT_DMI_DIR="$TMP/dmi-qemu" doctor 0 --interval 30m --state-bytes 16MiB --budget 20s
    jcheck "c['window']['status'] == 'ok' and 'periodic' in c['window']['message']"
    echo "no provider: nothing contacted, --interval advised"

    # Kubernetes -> --grace, SLURM -> --lead.
    KUBERNETES_SERVICE_HOST=10.0.0.1 CKPT_DMI_DIR="$TMP/dmi-qemu" doctor 0 --grace 20s \
        --state-bytes 16MiB --budget 20s
    jcheck "j['estimate']['window_s'] == 20 and 'Kubernetes' in c['window']['message']"
    SLURM_JOB_ID=42 CKPT_DMI_DIR="$TMP/dmi-qemu" doctor 0 --lead 90s \
        --state-bytes 16MiB --budget 20s
    jcheck "j['estimate']['window_s'] == 90 and 'SLURM' in c['window']['message']"
    echo "kubernetes and slurm windows right"
    ;;

badcreds)
    start "$TMP/s3" "$PY" "$SRC/tests/tools/mock_s3.py" --bucket ckpt-test \
        --access-key MOCKAK --secret-key 'mock/secret+key'
    export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_REGION=us-east-1
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    STORE="s3://ckpt-test/doc"
    # Right key first: everything works.
    AWS_ACCESS_KEY_ID=MOCKAK AWS_SECRET_ACCESS_KEY='mock/secret+key' \
        doctor 0 --state-bytes 16MiB --budget 20s --interval 10m
    jcheck "c['store-rw']['status'] == 'ok' and 'environment (AWS_ACCESS_KEY_ID)' in c['store']['message']"
    grep -q 'mock/secret' "$TMP/out" "$TMP/err" && fail "the secret key was printed"
    # Wrong key from the environment.
    AWS_ACCESS_KEY_ID=WRONGKEY AWS_SECRET_ACCESS_KEY=wrongsecret \
        doctor 1 --state-bytes 16MiB --budget 20s
    jcheck "c['store-rw']['status'] == 'fail' and 'environment (AWS_ACCESS_KEY_ID)' in c['store-rw']['message']"
    jcheck "'refused the credentials' in c['store-rw']['message'] and 'advice' in c['store-rw']"
    jcheck "not j['ok']"
    grep -q wrongsecret "$TMP/out" "$TMP/err" && fail "the secret key was printed"
    # Wrong key from a profile: the profile and its file are named.
    printf '[ckpt]\naws_access_key_id = WRONGKEY\naws_secret_access_key = wrongsecret\n' \
        >"$TMP/creds"
    AWS_PROFILE=ckpt AWS_SHARED_CREDENTIALS_FILE="$TMP/creds" \
        doctor 1 --state-bytes 16MiB --budget 20s
    jcheck "c['store-rw']['status'] == 'fail' and \"profile 'ckpt' in $TMP/creds\" in c['store-rw']['message']"
    # The human form says the same on one line, exit 1.
    AWS_ACCESS_KEY_ID=WRONGKEY AWS_SECRET_ACCESS_KEY=wrongsecret \
        "$CKPTRUN" doctor --store "$STORE" --run dtest --state-bytes 16MiB --budget 20s \
        >"$TMP/out" 2>&1 && fail "human form exited 0"
    grep -q '^fail  store-rw .*refused the credentials from environment' "$TMP/out" ||
        fail "no human fail line"
    echo "refused credentials: fail line names the source, exit 1"
    # Instance-role credentials (IMDSv2 on a second mock): the role is named.
    start "$TMP/s3role" "$PY" "$SRC/tests/tools/mock_s3.py" --bucket ckpt-test --imds
    AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:$PORT" \
        AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" doctor 0 --state-bytes 16MiB --budget 20s \
        --interval 10m
    jcheck "'instance role' in c['store']['message'] and c['store-rw']['status'] == 'ok'"
    echo "instance role: named"
    # A store that does not answer: fail, quickly.
    AWS_ACCESS_KEY_ID=MOCKAK AWS_SECRET_ACCESS_KEY='mock/secret+key' \
        AWS_ENDPOINT_URL="http://127.0.0.1:9" doctor 1 --state-bytes 16MiB --budget 20s
    jcheck "c['store-rw']['status'] == 'fail' and 'unreachable' in c['store-rw']['message']"
    jcheck "j['elapsed_ms'] < 20000 and c['upload']['status'] == 'skip'"
    echo "unreachable store: fail in $("$PY" -c "import json;print(json.load(open('$TMP/out'))['elapsed_ms'])") ms"
    ;;

slow)
    start "$TMP/s3" "$PY" "$SRC/tests/tools/mock_s3.py" --bucket ckpt-test \
        --access-key MOCKAK --secret-key 'mock/secret+key'
    up=$PORT
    start "$TMP/proxy" "$PY" "$SRC/tests/tools/faultproxy.py" --upstream "127.0.0.1:$up" \
        --rate 0 --delay-ms 20 --upload-bps 2000000
    export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_REGION=us-east-1 \
        AWS_ACCESS_KEY_ID=MOCKAK AWS_SECRET_ACCESS_KEY='mock/secret+key'
    start "$TMP/md" "$PY" "$SRC/tests/tools/metadata_mock.py" --provider aws
    export AWS_EC2_METADATA_DISABLED=false   # keys come from the environment
    dmi "$TMP/dmi" "Amazon EC2"
    STORE="s3://ckpt-test/doc"
    t0=$(date +%s%N)
    CKPT_DMI_DIR="$TMP/dmi" doctor 1 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 40GiB --budget 15s
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    jcheck "c['estimate-full']['status'] == 'fail' and 'NOT fit' in c['estimate-full']['message']"
    jcheck "c['estimate-incremental']['status'] == 'skip'"
    jcheck "'upload-bound' in c['estimate-full']['advice']"
    jcheck "j['estimate']['upload_bps'] < 4000000 and not j['estimate']['fits_full']"
    jcheck "j['bytes_sent'] <= 34 * 1024 * 1024"
    [ "$ms" -le 17000 ] || fail "took ${ms} ms with --budget 15s"
    # A smaller state on the same link: a full checkpoint does not fit. In
    # full training every byte changes between checkpoints, so the final
    # save is a full one: that fails (exit 1), however small an incremental
    # save would be -- and the work lost per preemption is stated.
    CKPT_DMI_DIR="$TMP/dmi" doctor 1 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 2GiB --budget 15s --interval 10m
    jcheck "c['estimate-full']['status'] == 'fail' and c['estimate-incremental']['status'] == 'skip'"
    jcheck "j['estimate']['changed'] == 1 and not j['estimate']['fits_final']"
    jcheck "c['lost-work']['status'] == 'warn' and 'on average' in c['lost-work']['message']"
    jcheck "300 < j['estimate']['lost_if_final_fails_s'] < 2000 and j['estimate']['interval_s'] == 600"
    # Without --interval the loss is unbounded: that fails too.
    CKPT_DMI_DIR="$TMP/dmi" doctor 1 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 2GiB --budget 15s
    jcheck "c['lost-work']['status'] == 'fail' and '--interval' in c['lost-work']['advice']"
    # A frozen-backbone / LoRA run says how little changes: the final save
    # then fits, the full one is only a warning, exit 0.
    CKPT_DMI_DIR="$TMP/dmi" doctor 0 --metadata-url "http://127.0.0.1:$PORT" \
        --state-bytes 2GiB --budget 15s --changed 2% --interval 10m
    jcheck "c['estimate-full']['status'] == 'warn' and c['estimate-incremental']['status'] == 'ok'"
    jcheck "j['estimate']['changed'] == 0.02 and j['estimate']['fits_final']"
    jcheck "c['lost-work']['status'] == 'ok' and 'almost nothing' in c['lost-work']['message']"
    # The rate this link sustains, measured otherwise, replaces the probe's
    # (2 MB/s here): the same 2 GiB fit; the trainer's step adds half of it.
    CKPT_DOCTOR_UPLOAD_RATE=1G CKPT_DMI_DIR="$TMP/dmi" doctor 0 \
        --metadata-url "http://127.0.0.1:$PORT" --state-bytes 2GiB --budget 15s --interval 10m
    jcheck "j['estimate']['upload_source'] == 'CKPT_DOCTOR_UPLOAD_RATE'"
    jcheck "j['estimate']['upload_bps'] == 1073741824 and j['estimate']['fits_full']"
    base=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["estimate"]["full_s"])' "$TMP/out")
    # (a long step: the two runs' own CPU measurements differ by seconds)
    CKPT_DOCTOR_STEP=400s CKPT_DOCTOR_UPLOAD_RATE=1G CKPT_DMI_DIR="$TMP/dmi" doctor 1 \
        --metadata-url "http://127.0.0.1:$PORT" --state-bytes 2GiB --budget 15s --interval 10m
    jcheck "j['estimate']['step_s'] == 400 and 180 < j['estimate']['full_s'] - $base < 220"
    echo "slow store: estimate fails (${ms} ms, inside the budget); smaller state: full fails," \
        "--changed 2%: warn, lost work stated; a rate measured otherwise and a step given count"
    ;;

changed)
    # The share that changes, measured from the run's own checkpoints: 25
    # chunks of 4 MiB, one of them rewritten between two saves (4%).
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    mkdir -p "$TMP/src/m"
    head -c $((100 * 1024 * 1024)) /dev/urandom >"$TMP/src/m/w.bin"
    "$CKPTRUN" save --store "$STORE" --run dtest -q --codec none --step 1 "$TMP/src/m" ||
        fail "save 1"
    dd if=/dev/urandom of="$TMP/src/m/w.bin" bs=1M count=4 seek=8 conv=notrunc 2>/dev/null
    "$CKPTRUN" save --store "$STORE" --run dtest -q --codec none --step 2 "$TMP/src/m" ||
        fail "save 2"
    KUBERNETES_SERVICE_HOST=10.0.0.1 doctor 0 --grace 60s --state-bytes 1GiB --budget 20s \
        --interval 10m
    jcheck "0.03 < j['estimate']['changed'] < 0.06 and 'measured' in j['estimate']['changed_source']"
    jcheck "c['changed']['status'] == 'ok' and 'measured on run dtest' in c['changed']['message']"
    jcheck "c['estimate-incremental']['status'] != 'skip'"
    # --changed wins over the measurement; a fresh run assumes everything.
    KUBERNETES_SERVICE_HOST=10.0.0.1 doctor 0 --grace 60s --state-bytes 1GiB --budget 20s \
        --interval 10m --changed 0.5
    jcheck "j['estimate']['changed'] == 0.5 and '--changed' in j['estimate']['changed_source']"
    KUBERNETES_SERVICE_HOST=10.0.0.1 "$CKPTRUN" doctor --store "$STORE" --run fresh --json \
        --grace 60s --state-bytes 1GiB --budget 20s --interval 10m >"$TMP/out" 2>"$TMP/err"
    jcheck "j['estimate']['changed'] == 1 and c['estimate-incremental']['status'] == 'skip'"
    "$CKPTRUN" doctor --store "$STORE" --run dtest --changed 150% >"$TMP/out" 2>&1
    [ $? = 64 ] || fail "--changed 150% accepted"
    echo "changed: measured from the run's checkpoints (4%), --changed wins, fresh run: all"
    ;;

disk)
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    mkdir -p "$TMP/small"
    # A real small filesystem when a private mount namespace is allowed.
    if unshare -m true 2>/dev/null; then
        unshare -m sh -c "mount -t tmpfs -o size=1m tmpfs '$TMP/small' &&
            '$CKPTRUN' doctor --store '$STORE' --run dtest --json --dir '$TMP/small' \
                --state-bytes 64MiB --budget 20s --interval 10m" >"$TMP/out" 2>"$TMP/err"
        rc=$?
        if [ -s "$TMP/out" ]; then
            [ $rc = 1 ] || fail "tmpfs: exit $rc"
            jcheck "c['disk']['status'] == 'fail' and 'tmpfs' in c['disk']['message']"
            jcheck "'in memory' in c['disk-survival']['message']"
            echo "1 MiB tmpfs: disk line fails, survival says in memory"
        else
            echo "tmpfs cannot be mounted here ($(cat "$TMP/err")): tmpfs part skipped"
        fi
    else
        echo "no private mount namespace here: tmpfs part skipped"
    fi
    # The documented override: a nearly full filesystem.
    CKPT_DOCTOR_DISK_FREE=1MiB doctor 1 --dir "$TMP/small" --state-bytes 64MiB --budget 20s \
        --interval 10m
    jcheck "c['disk']['status'] == 'fail' and 'needs' in c['disk']['message']"
    CKPT_DOCTOR_DISK_FREE=100MiB doctor 0 --dir "$TMP/small" --state-bytes 64MiB --budget 20s \
        --interval 10m
    jcheck "c['disk']['status'] == 'warn'"
    # State from --dir: the newest entry is measured and sampled.
    mkdir -p "$TMP/ck/checkpoint-100" "$TMP/ck/checkpoint-200"
    head -c 3000000 /dev/urandom >"$TMP/ck/checkpoint-100/model.bin"
    head -c 5000000 /dev/zero >"$TMP/ck/checkpoint-200/model.bin"
    head -c 1000000 /dev/urandom >"$TMP/ck/checkpoint-200/optim.bin"
    # the older entry by its times (doctor compares entries' mtimes in seconds)
    touch -d '1 minute ago' "$TMP/ck/checkpoint-100/model.bin" "$TMP/ck/checkpoint-100"
    doctor 0 --dir "$TMP/ck" --budget 20s --interval 10m
    jcheck "j['estimate']['state_bytes'] == 6000000 and 'checkpoint-200' in c['state']['message']"
    echo "disk: override fails/warns; --dir sizes the newest entry"
    # Nothing left behind in the file store (probe objects and their dirs).
    [ -z "$(ls -A "$TMP/store" 2>/dev/null)" ] || fail "left in the store: $(find "$TMP/store")"
    ;;
prereqs)
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    # The store's path is a regular file.
    : >"$TMP/afile"
    STORE="file://$TMP/afile"
    prereq "store path is a file" store "must be a directory"
    # An unreadable directory and a read-only one: as an unprivileged user
    # (root reads and writes everything), or as ourselves when not root.
    chmod 711 "$TMP"
    mkdir -p "$TMP/pub/locked" "$TMP/pub/ro"
    chmod 755 "$TMP/pub" "$TMP/pub/ro"
    chmod 700 "$TMP/pub/locked"
    if [ "$(id -u)" = 0 ]; then
        if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null &&
            setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$CKPTRUN"; then
            AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
        else
            echo "SKIPPED: unreadable/read-only directory cases: cannot run as uid 65534 here" \
                "(setpriv missing, or $CKPTRUN not reachable for that user)"
            exit 0
        fi
    else
        chmod 000 "$TMP/pub/locked"
        chmod 555 "$TMP/pub/ro"
    fi
    STORE="file://$TMP/pub/locked"
    prereq "unreadable directory" store "cannot create files there" --dir "$TMP/pub/ck"
    STORE="file://$TMP/pub/ro"
    prereq "read-only directory" store-rw "cannot create files there" --dir "$TMP/pub/ck"
    AS=""
    ;;

prereqs_s3)
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    start "$TMP/s3" "$PY" "$SRC/tests/tools/mock_s3.py" --bucket ckpt-test \
        --access-key MOCKAK --secret-key 'mock/secret+key'
    export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_REGION=us-east-1
    STORE="s3://ckpt-test/doc"
    # No credentials anywhere (environment, files, instance role).
    prereq "no credentials" store "fix the credentials"
    export AWS_ACCESS_KEY_ID=MOCKAK
    AWS_SECRET_ACCESS_KEY=wrongsecret prereq "wrong secret" store-rw "fix the credentials"
    grep -q wrongsecret "$TMP/out" "$TMP/human" && fail "the secret key was printed"
    export AWS_SECRET_ACCESS_KEY='mock/secret+key'
    # A closed loopback port: bound, then released.
    closed=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    AWS_ENDPOINT_URL="http://127.0.0.1:$closed" prereq "unreachable endpoint" store-rw \
        "does not answer"
    jcheck "j['elapsed_ms'] < 20000"
    STORE="s3://no-such-bucket/doc"
    prereq "missing bucket" store-rw "bucket/container name"
    ;;

prereqs_azure)
    NPM="$SRC/tests/npm/node_modules"
    if ! command -v node >/dev/null 2>&1 || [ ! -d "$NPM/azurite" ]; then
        echo "node or tests/npm/node_modules/azurite missing: skipped"
        exit 77
    fi
    dmi "$TMP/dmi" "QEMU"
    export CKPT_DMI_DIR="$TMP/dmi"
    aport=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    mkdir -p "$TMP/azdata"
    node "$NPM/azurite/dist/src/blob/main.js" --blobHost 127.0.0.1 --blobPort "$aport" \
        -l "$TMP/azdata" --skipApiVersionCheck --disableTelemetry --silent \
        >"$TMP/az.log" 2>&1 &
    PIDS="$PIDS $!"
    for _ in $(seq 100); do
        "$PY" -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' \
            "$aport" 2>/dev/null && break
        sleep 0.1
    done
    # The well-known Azurite development account (public, local only).
    key=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
    cs() { echo "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$1;BlobEndpoint=http://127.0.0.1:$aport/devstoreaccount1;"; }
    # The container exists (made through a first doctor that works).
    STORE="az://ckpt-test/doc"
    AZURE_STORAGE_CONNECTION_STRING=$(cs "$key") CKPT_AZ_CREATE_CONTAINER=1 \
        doctor 0 --state-bytes 16MiB --budget 20s --interval 10m
    jcheck "c['store-rw']['status'] == 'ok'"
    # A wrong key: Azurite verifies SharedKey signatures and refuses it.
    wrong=$(printf 'wrong-key-wrong-key-wrong-key-wrong-key-wrong-key-wrong-key!!' | base64 -w0)
    AZURE_STORAGE_CONNECTION_STRING=$(cs "$wrong") prereq "wrong account key" store-rw \
        "fix the credentials"
    grep -q "$wrong" "$TMP/out" "$TMP/human" && fail "the key was printed"
    # A container that does not exist.
    STORE="az://no-such-container/doc"
    AZURE_STORAGE_CONNECTION_STRING=$(cs "$key") prereq "missing container" store-rw \
        "bucket/container name"
    ;;

*)
    echo "unknown case $CASE"; exit 64 ;;
esac
exit 0
