#!/bin/sh
# store_peers.sh -- run the store conformance program against a local peer.
#
#   store_peers.sh CONFORMANCE_BIN SOURCE_DIR s3rver|azurite|mock [plain|faults]
#   store_peers.sh CONFORMANCE_BIN SOURCE_DIR mock role|tls|gcs
#   store_peers.sh CONFORMANCE_BIN SOURCE_DIR azurite sas
#   store_peers.sh C_TRAINER_BIN SOURCE_DIR s3rver|azurite|mock trainer
#   store_peers.sh CKPTRUN_BIN SOURCE_DIR s3rver|azurite|mock flip
#   store_peers.sh CKPTRUN_BIN SOURCE_DIR mock options
#
# Starts s3rver 3.7.1 or Azurite (tests/npm, installed with `npm ci`) or
# tests/tools/mock_s3.py (a strict S3: signatures, conditions) on a
# free loopback port with its data in a temporary directory, optionally puts
# tests/tools/faultproxy.py in front of it, runs the conformance checks, and
# stops everything it started. Exit 77 (ctest: skipped) when node or the npm
# packages are missing.
set -eu

CONF=$1
SRC=$2
PEER=$3
MODE=${4:-plain}
NPM="$SRC/tests/npm/node_modules"

if [ "$PEER" != mock ] && { ! command -v node >/dev/null 2>&1 || [ ! -d "$NPM/s3rver" ] ||
                            [ ! -d "$NPM/azurite" ]; }; then
    echo "store_peers: node or tests/npm/node_modules missing (run: cd tests/npm && npm ci): skipped"
    exit 77
fi

TMP=$(mktemp -d)
PEER_PID=""
PROXY_PID=""
cleanup() {
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null || true
    [ -n "$PEER_PID" ] && kill "$PEER_PID" 2>/dev/null || true
    [ -n "$PROXY_PID" ] && wait "$PROXY_PID" 2>/dev/null || true
    [ -n "$PEER_PID" ] && wait "$PEER_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
    i=0
    while ! python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then
            echo "store_peers: $PEER did not start"; cat "$TMP/peer.log"; exit 1
        fi
        sleep 0.1
    done
}

PORT=$(free_port)
mkdir -p "$TMP/data"
case $PEER in
s3rver)
    # s3rver's paged listings need the legacy OpenSSL provider on Node >= 17.
    node --openssl-legacy-provider "$NPM/s3rver/bin/s3rver.js" -d "$TMP/data" \
        -a 127.0.0.1 -p "$PORT" --configure-bucket ckpt-test >"$TMP/peer.log" 2>&1 &
    PEER_PID=$!
    ;;
azurite)
    node "$NPM/azurite/dist/src/blob/main.js" --blobHost 127.0.0.1 --blobPort "$PORT" \
        -l "$TMP/data" --skipApiVersionCheck --disableTelemetry --silent >"$TMP/peer.log" 2>&1 &
    PEER_PID=$!
    ;;
mock)
    # tests/tools/mock_s3.py: verifies signatures, enforces conditions, and
    # is started in the "wrong" region with a clock two hours ahead and one
    # "200 with an error inside" CompleteMultipartUpload to answer.
    if [ "$MODE" = role ]; then
        margs="--imds --role-ttl 302"
    elif [ "$MODE" = tls ]; then
        # A throw-away CA-less certificate for 127.0.0.1: trusted only
        # through AWS_CA_BUNDLE.
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" \
            -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
        margs="--token tok/en+1 --tls-cert $TMP/cert.pem --tls-key $TMP/key.pem"
    elif [ "$MODE" = gcs ]; then
        margs="--gcs --skew-once 7200"
    else
        margs="--token tok/en+1 --skew-once 7200"
    fi
    mregion=eu-central-1
    [ "$MODE" = gcs ] && mregion=auto
    python3 "$SRC/tests/tools/mock_s3.py" --bucket ckpt-test --region $mregion \
        --access-key MOCKAK --secret-key 'mock/secret+key' $margs \
        --page 250 --complete-error-once >"$TMP/mock.out" 2>"$TMP/peer.log" &
    PEER_PID=$!
    i=0
    while ! grep -q PORT "$TMP/mock.out" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "mock did not start"; cat "$TMP/peer.log"; exit 1; }
        sleep 0.1
    done
    PORT=$(awk '/PORT/{print $2}' "$TMP/mock.out")
    ;;
*)
    echo "unknown peer $PEER"; exit 64 ;;
esac
wait_port "$PORT"

TARGET=$PORT
ARGS=""
export CKPT_RETRY_BASE_MS=10
if [ "$MODE" = faults ] || [ "$MODE" = trainer ]; then
    RATE=0.15
    [ "$MODE" = trainer ] && RATE=0.05
    python3 "$SRC/tests/tools/faultproxy.py" --upstream "127.0.0.1:$PORT" --rate $RATE \
        --stall-s 2 --seed 7 >"$TMP/proxy.out" 2>"$TMP/proxy.err" &
    PROXY_PID=$!
    i=0
    while ! grep -q PORT "$TMP/proxy.out" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 50 ] && { echo "proxy did not start"; exit 1; }
        sleep 0.1
    done
    TARGET=$(awk '/PORT/{print $2}' "$TMP/proxy.out")
    ARGS="--many 120"
    export CKPT_HTTP_STALL_MS=1000
elif [ "$MODE" = flip ]; then
    python3 "$SRC/tests/tools/faultproxy.py" --upstream "127.0.0.1:$PORT" --flip-once \
        >"$TMP/proxy.out" 2>"$TMP/proxy.err" &
    PROXY_PID=$!
    i=0
    while ! grep -q PORT "$TMP/proxy.out" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 50 ] && { echo "proxy did not start"; exit 1; }
        sleep 0.1
    done
    TARGET=$(awk '/PORT/{print $2}' "$TMP/proxy.out")
fi

# Keep the user's own cloud configuration out of the test.
export HOME="$TMP"
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3 AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE \
    AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN 2>/dev/null || true
export AWS_EC2_METADATA_DISABLED=true

# Per peer: the client's environment and the store URL.
case $PEER in
s3rver)
    export CKPT_TEST_SECRET=S3RVER CKPT_S3_MULTIPART_MIN=6000000 CKPT_S3_PART_SIZE=5242880
    if [ "$MODE" = plain ]; then
        # Credentials, region and endpoint from a named profile in the shared
        # files (the `s3 =` sub-section), as the AWS CLI would read them.
        cat >"$TMP/credentials" <<EOC
[default]
aws_access_key_id = WRONG
aws_secret_access_key = WRONG

[ckpt-test]
aws_access_key_id = S3RVER
aws_secret_access_key = S3RVER
EOC
        cat >"$TMP/config" <<EOC
[profile ckpt-test]
region = eu-west-3
s3 =
    addressing_style = path
    endpoint_url = http://127.0.0.1:$TARGET
EOC
        unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL AWS_REGION AWS_DEFAULT_REGION 2>/dev/null || true
        export AWS_PROFILE=ckpt-test AWS_SHARED_CREDENTIALS_FILE="$TMP/credentials" \
            AWS_CONFIG_FILE="$TMP/config"
    else
        export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
            AWS_ENDPOINT_URL="http://127.0.0.1:$TARGET" AWS_REGION=us-east-1
    fi
    URL="s3://ckpt-test/conf/$MODE"
    ;;
mock)
    export CKPT_TEST_SECRET='mock/secret+key' AWS_ACCESS_KEY_ID=MOCKAK \
        AWS_SECRET_ACCESS_KEY='mock/secret+key' AWS_SESSION_TOKEN='tok/en+1' \
        AWS_REGION=us-west-2 AWS_ENDPOINT_URL="http://127.0.0.1:$TARGET" \
        CKPT_S3_CONDITIONAL=1 CKPT_S3_MULTIPART_MIN=6000000 CKPT_S3_PART_SIZE=5242880
    if [ "$MODE" = role ]; then
        # No keys anywhere: the instance role (IMDSv2 on the mock) supplies
        # them, with a session token that expires every few seconds.
        unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
        export AWS_EC2_METADATA_DISABLED=false \
            AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:$PORT"
    fi
    if [ "$MODE" = tls ]; then
        export AWS_ENDPOINT_URL="https://127.0.0.1:$TARGET"
    fi
    # The mock checks x-amz-checksum-crc32c: object PUTs carry it here (as on
    # AWS); role and tls keep the Content-MD5 default of custom endpoints.
    if [ "${CKPT_TEST_HAVE_ISAL:-0}" = 1 ] && [ "$MODE" != role ] && [ "$MODE" != tls ]; then
        export CKPT_S3_CHECKSUM=crc32c
    fi
    URL="s3://ckpt-test/conf/$MODE"
    ARGS=${ARGS:---many 600 --rate}
    if [ "$MODE" = gcs ]; then
        # gs://: the GCS XML API with HMAC keys, as the mock's --gcs mode
        # answers it (generations, x-goog-if-generation-match, no batch
        # delete). Conditions are enforced there, as on GCS itself.
        unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL
        export GOOGLE_ACCESS_KEY_ID=MOCKAK GOOGLE_SECRET_ACCESS_KEY='mock/secret+key' \
            CKPT_GS_ENDPOINT="http://127.0.0.1:$TARGET" CKPT_S3_CONDITIONAL=1 \
            CKPT_S3_STORAGE_CLASS=NEARLINE
        URL="gs://ckpt-test/conf/gcs"
        ARGS="--many 300"
    fi
    ;;
azurite)
    # The well-known Azurite development account (public, local only).
    export AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$TARGET/devstoreaccount1;" \
        CKPT_TEST_SECRET=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw== \
        CKPT_AZ_CREATE_CONTAINER=1 CKPT_AZ_LIST_MAX=100 \
        CKPT_AZ_BLOCK_MIN=6000000 CKPT_AZ_BLOCK_SIZE=4194304
    if [ "$MODE" = sas ]; then
        # The same account through an account SAS instead of the key.
        SAS=$(python3 "$SRC/tests/tools/azurite_sas.py" "$CKPT_TEST_SECRET")
        export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=http://127.0.0.1:$TARGET/devstoreaccount1;SharedAccessSignature=$SAS"
        ARGS="--many 150 --big 7000000"
    fi
    URL="az://ckpt-test/conf/$MODE"
    ARGS=${ARGS:---many 500}
    ;;
esac

rc=0
if [ "$MODE" = trainer ]; then
    # End to end through libckpt: the example trainer killed with SIGKILL at
    # random moments and restarted against the object store (through the
    # fault proxy) ends with the same parameters as an uninterrupted run on
    # a local file store. CONF is the c_trainer binary here.
    targs="--steps 150 --every 5 --hidden 512 --quiet"
    t0=$(date +%s%N)
    CKPT_STORE="file://$TMP/filestore" CKPT_RUN=clean "$CONF" $targs --sleep-ms 2 \
        --out "$TMP/clean.bin" >/dev/null
    ms=$(( ($(date +%s%N) - t0) / 1000000 + 500 ))
    kills=0
    attempt=0
    while [ $attempt -lt 60 ]; do
        attempt=$((attempt + 1))
        CKPT_STORE="$URL" CKPT_RUN=killed "$CONF" $targs --sleep-ms 2 \
            --out "$TMP/killed.bin" >"$TMP/trainer.log" 2>&1 &
        tpid=$!
        d=$(( ms / 5 + $(od -An -N2 -tu2 /dev/urandom) % (ms + 1) ))
        sleep "$((d / 1000)).$(printf '%03d' $((d % 1000)))"
        # Six kills make the point; then let it finish.
        if [ $kills -lt 6 ] && kill -9 "$tpid" 2>/dev/null; then
            wait "$tpid" 2>/dev/null || true
            kills=$((kills + 1))
        else
            wait "$tpid" || { echo "trainer failed"; cat "$TMP/trainer.log"; rc=1; break; }
            break
        fi
    done
    if [ $rc -eq 0 ]; then
        if [ -f "$TMP/killed.bin" ] && cmp "$TMP/clean.bin" "$TMP/killed.bin"; then
            echo "$PEER: killed $kills times; final parameters identical to the uninterrupted run"
        else
            echo "$PEER: trainer never finished or differs"; cat "$TMP/trainer.log"; rc=1
        fi
    fi
elif [ "$MODE" = options ]; then
    # What S3 users set, through ckptrun's flags: storage class and SSE-KMS
    # on every object written (the mock records the headers), at most
    # --connections requests in flight, --max-rate pacing the upload, bad
    # values refused with the right exit code.
    mkdir -p "$TMP/in"
    head -c 12582912 /dev/urandom >"$TMP/in/data.bin"
    # 1 MiB chunks in packs of 4 MiB: 4 chunks a pack, 3 packs
    export CKPT_CHUNK_BYTES=1048576 CKPT_PACK_BYTES=4M
    "$CONF" save --store "$URL" --run opt --step 1 --storage-class STANDARD_IA \
        --sse-kms-key-id key-1 --connections 2 "$TMP/in/data.bin" >"$TMP/save.log" 2>&1 ||
        { echo "save failed"; cat "$TMP/save.log"; rc=1; }
    state=$(python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
        "http://127.0.0.1:$PORT/__mock/state")
    echo "$state" | python3 -c '
import json, sys
st = json.load(sys.stdin)
objs = {k: v for k, v in st["objects"].items() if "/opt/" in k}
bad = [k for k, v in objs.items()
       if v != {"class": "STANDARD_IA", "sse": "aws:kms", "kms": "key-1"}]
packs = [k for k in objs if "/packs/" in k]
print("options: %d objects, %d packs, max in flight %d" % (len(objs), len(packs), st["max_inflight"]))
sys.exit(1 if bad or len(packs) != 3 or not 1 <= st["max_inflight"] <= 2 else 0)' || {
        echo "storage class / SSE / connections not as asked: $state" | cut -c1-600; rc=1; }
    t0=$(date +%s%N)
    "$CONF" save --store "$URL" --run rate --step 1 --max-rate 4M "$TMP/in/data.bin" \
        >"$TMP/rate.log" 2>&1 || { echo "rate save failed"; cat "$TMP/rate.log"; rc=1; }
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    # 12 MiB at 4 MiB/s is 3 s (less a 100 ms burst)
    if [ "$ms" -lt 2700 ]; then echo "--max-rate 4M: 12 MiB went up in $ms ms"; rc=1; fi
    echo "options: 12 MiB at --max-rate 4M took $ms ms"
    unset CKPT_CHUNK_BYTES CKPT_PACK_BYTES
    "$CONF" restore --store "$URL" --run opt "$TMP/out" >"$TMP/restore.log" 2>&1 &&
        cmp "$TMP/in/data.bin" "$TMP/out/data.bin" || { echo "restore failed"; rc=1; }
    for bad in "--storage-class GLACIER:78" "--storage-class lower:78" "--sse AES:64" \
               "--max-rate fast:64" "--connections 0:64" "--sse AES256 --sse-kms-key-id k:78"; do
        code=0
        # shellcheck disable=SC2086
        "$CONF" save --store "$URL" --run bad --step 1 ${bad%:*} "$TMP/in/data.bin" \
            >"$TMP/bad.log" 2>&1 || code=$?
        if [ "$code" != "${bad##*:}" ]; then
            echo "'${bad%:*}': exit $code, expected ${bad##*:}"; cat "$TMP/bad.log"; rc=1
        fi
    done
    # S3 settings in the environment do not concern (nor break) a file store;
    # given as flags there, they are named as ignored.
    mkdir -p "$TMP/fs" # ls reads a store, never creates one
    CKPT_S3_STORAGE_CLASS=GLACIER CKPT_S3_SSE=bogus "$CONF" ls --store "file://$TMP/fs" \
        >"$TMP/fs.log" 2>&1 || { echo "S3 settings broke a file store"; cat "$TMP/fs.log"; rc=1; }
    "$CONF" ls --store "file://$TMP/fs" --storage-class STANDARD_IA >"$TMP/fs.log" 2>&1 &&
        grep -q "applies to s3://" "$TMP/fs.log" ||
        { echo "--storage-class on a file store: no warning"; cat "$TMP/fs.log"; rc=1; }
elif [ "$MODE" = flip ]; then
    # Every object's first GET (each range of a pack once) arrives with one
    # byte changed (the proxy's --flip-once). Small objects (HEAD, manifest)
    # are caught by the store's digest and retried there; chunks by their
    # own checksums, and fetched again: the restore is byte-exact and no
    # older step was used. Twice: 20 chunks of 1 MiB in packs of 4 MiB (4
    # chunks each: 5 packs, one range GET each, 5 fetched again),
    # then each chunk its own object (CKPT_PACK_BYTES=0: 20 fetched again).
    # The save uploads one pack at a time (2 connections), so none of them
    # is sealed early to spread the end of the save over several uploads.
    mkdir -p "$TMP/in"
    head -c 20971520 /dev/urandom >"$TMP/in/data.bin"
    for packs in 4M:5 0:20; do
        run="flip${packs%%:*}"
        CKPT_CONNECTIONS=2 CKPT_CHUNK_BYTES=1048576 CKPT_PACK_BYTES=${packs%%:*} "$CONF" save --store "$URL" \
            --run "$run" --step 3 "$TMP/in/data.bin" >"$TMP/save.log" 2>&1 ||
            { echo "save failed"; cat "$TMP/save.log"; rc=1; break; }
        # the reader's chunk size (and pack size) is its own
        rm -rf "$TMP/out"
        "$CONF" restore --store "$URL" --run "$run" "$TMP/out" >"$TMP/restore.log" 2>&1 ||
            { echo "restore failed"; cat "$TMP/restore.log"; rc=1; break; }
        again=$(grep -c "fetching it again" "$TMP/restore.log" || true)
        if ! cmp "$TMP/in/data.bin" "$TMP/out/data.bin"; then
            echo "restored bytes differ"; rc=1
        elif [ "$again" -ne "${packs##*:}" ]; then
            echo "packs ${packs%%:*}: expected ${packs##*:} fetches made again, saw $again"
            cat "$TMP/restore.log"; rc=1
        elif grep -q "instead of the newer" "$TMP/restore.log"; then
            echo "an older step was restored"; rc=1
        else
            echo "$PEER: packs ${packs%%:*}: $again damaged transfers fetched again; restore byte-exact"
        fi
    done
elif [ "$MODE" = tls ]; then
    # Verification is always on: an unknown certificate is refused (a
    # configuration error, not retried) ...
    if "$CONF" "$URL" --many 0 --big 0 >"$TMP/notrust.log" 2>&1; then
        echo "untrusted certificate accepted"; rc=1
    elif ! grep -q "bad configuration" "$TMP/notrust.log"; then
        echo "untrusted certificate: unexpected failure"; cat "$TMP/notrust.log"; rc=1
    fi
    # ... and accepted once AWS_CA_BUNDLE names it.
    AWS_CA_BUNDLE="$TMP/cert.pem" "$CONF" "$URL" --many 1100 --big 0 || rc=$?
else
    "$CONF" "$URL" $ARGS || rc=$?
    if [ "$MODE" = gcs ] && [ $rc -eq 0 ]; then
        # every object went up in the storage class asked for (x-goog-storage-class)
        python3 -c '
import json, sys, urllib.request
st = json.loads(urllib.request.urlopen(sys.argv[1]).read())
objs = st["objects"]
bad = [k for k, v in objs.items() if v["class"] != "NEARLINE" or v["sse"]]
print("gcs: %d objects written, %d without storage class NEARLINE" % (len(objs), len(bad)))
sys.exit(1 if bad or not objs else 0)' "http://127.0.0.1:$PORT/__mock/state" || rc=1
    fi
fi
if [ -n "$PROXY_PID" ]; then
    kill "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=""
    cat "$TMP/proxy.err"
fi
if [ "$MODE" = role ]; then
    kill "$PEER_PID" 2>/dev/null || true
    wait "$PEER_PID" 2>/dev/null || true
    PEER_PID=""
    fetches=$(sed -n 's/.*fetched \([0-9]*\) times.*/\1/p' "$TMP/peer.log")
    echo "role credentials fetched ${fetches:-0} times"
    # Fetched at open, then refreshed as they neared expiry during the run.
    [ "${fetches:-0}" -ge 2 ] || { echo "role credentials were never refreshed"; rc=1; }
fi
[ $rc -ne 0 ] && tail -20 "$TMP/peer.log"
exit $rc
