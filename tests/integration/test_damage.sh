#!/bin/bash
# test_damage.sh -- damage told as damage, and only damage, through the real
# binaries on a file:// store (tests/damage.cmake).
#
#   test_damage.sh CKPTRUN C_TRAINER SEAL_RECORD CASE
#
# verify_race  `ckptrun verify` 20 times beside a C trainer saving every
#              20 ms with --keep 3 (its retention removes a checkpoint
#              between verify's reading HEAD and reading it): exit 0 every
#              time, never "damaged"
# head         HEAD damaged three ways (garbage, one byte changed under its
#              checksum, empty): `ckptrun ls` (--run, and the runs table
#              marking the newest step the manifests show) and `restore`
#              read the manifests and say so, `verify` exits 1 saying the checkpoints
#              are intact and how HEAD gets rewritten, the C trainer resumes
#              from the newest and its next save rewrites HEAD; damaged
#              again, `ckptrun run` rewrites it when it takes the lease
# ranks        a format-1 manifest claiming world_size 2 (sealed again, as a
#              hostile store would): verify says damaged, not "newer
#              format"; the trainer resumes below it and its saves commit
set -u

CKPTRUN=$1
TRAINER=$2
SEAL=$3
CASE=$4
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "no python3: skipped"; exit 77; }

TMP=$(mktemp -d)
TPID=""
cleanup() {
    [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*"; for f in "$TMP"/out "$TMP"/err; do [ -f "$f" ] && cat "$f"; done; exit 1; }

export HOME="$TMP/home"
mkdir -p "$HOME"
unset CKPT_STORE CKPT_RUN CKPT_DIR CKPT_KEEP CKPT_LOG CKPT_SOCKET CKPT_EPOCH 2>/dev/null
STORE="file://$TMP/store"
T="$TRAINER --store $STORE --hidden 64 --input 16 --quiet"

# run EXPECTED_RC ARGS...: ckptrun ARGS, stdout in $TMP/out, stderr in $TMP/err
run() {
    local want=$1; shift
    "$CKPTRUN" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "ckptrun $* exited $rc, expected $want"
}

# steps RUN: the steps `ckptrun ls` lists, newest first, on one line
steps() {
    "$CKPTRUN" ls --store "$STORE" --run "$1" 2>/dev/null | awk 'NR > 1 { print $1 }' | xargs
}

# The record at PATH, its JSON edited by the python statement EDIT (on `j`)
# and sealed again.
reseal() {
    "$PY" - "$1" "$2" <<'EOF' | "$SEAL" >"$1.new" || fail "reseal $1"
import json, sys
text = open(sys.argv[1]).read().rsplit("\n#xxh64:", 1)[0]
j = json.loads(text)
exec(sys.argv[2])
print(json.dumps(j, separators=(",", ":")))
EOF
    mv "$1.new" "$1"
}

# The manifest file HEAD names for step S of run R.
manifest_of() {
    "$PY" - "$TMP/store/$1/HEAD" "$2" <<'EOF'
import json, sys
h = json.loads(open(sys.argv[1]).read().rsplit("\n#xxh64:", 1)[0])
print([e["manifest"] for e in h["retained"] if e["step"] == sys.argv[2]][0])
EOF
}

case $CASE in
verify_race)
    # 3 x 650 KiB a checkpoint: verify takes longer than a save's 20 ms
    $TRAINER --store "$STORE" --hidden 2048 --input 64 --quiet --run t --steps 100000000 \
        --every 1 --sleep-ms 20 --out "$TMP/o.bin" >"$TMP/trainer.log" 2>&1 &
    TPID=$!
    for _ in $(seq 200); do
        [ "$(steps t | wc -w)" -ge 3 ] && break
        sleep 0.05
    done
    [ "$(steps t | wc -w)" -ge 3 ] || fail "the trainer committed nothing: $(cat "$TMP/trainer.log")"
    gone=0
    for i in $(seq 20); do
        run 0 verify --store "$STORE" --run t --json
        grep -q damaged "$TMP/err" "$TMP/out" && fail "try $i: damaged"
        g=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['gone'])" "$TMP/out")
        gone=$((gone + g))
    done
    kill "$TPID"
    wait "$TPID" 2>/dev/null
    TPID=""
    echo "20 verifies beside a trainer saving every 20 ms: all intact;" \
        "$gone checkpoints removed by retention while verify ran, none called damaged"
    ;;

head)
    for how in garbage checksum empty; do
        r=h-$how
        $T --run $r --steps 30 --every 10 --out "$TMP/o.bin" >"$TMP/trainer.log" 2>&1 ||
            fail "trainer: $(cat "$TMP/trainer.log")"
        [ "$(steps $r)" = "30 20 10" ] || fail "$r before: $(steps $r)"
        head=$TMP/store/$r/HEAD
        case $how in
        garbage) echo garbage >"$head" ;;
        checksum) sed -i 's/"step":"30"/"step":"31"/' "$head" ;;
        empty) : >"$head" ;;
        esac
        run 0 ls --store "$STORE" --run $r
        [ "$(awk 'NR > 1 { print $1 }' "$TMP/out" | xargs)" = "30 20 10" ] || fail "$how: ls"
        grep -q "HEAD is damaged.*read from its manifests instead" "$TMP/err" ||
            fail "$how: ls does not say HEAD is damaged"
        # the runs table: the newest step its manifests show, marked
        run 0 ls --store "$STORE"
        grep -Eq "^$r +[a-z?]+ +30! " "$TMP/out" || fail "$how: the runs table"
        grep -q "run $r: $r/HEAD is damaged.*'!' marks the newest step they show.*ckptrun ls --run $r" \
            "$TMP/err" || fail "$how: the runs table does not warn, or say what '!' is"
        run 0 ls --store "$STORE" --json
        "$PY" - "$TMP/out" "$r" <<'EOF' || fail "$how: ls --json"
import json, sys
row = [x for x in json.load(open(sys.argv[1])) if x["run"] == sys.argv[2]][0]
assert row["newest_step"] == 30 and row["checkpoints"] == 3, row
assert row["head_damaged"] is True and "HEAD is damaged" in row["error"], row
EOF
        run 0 restore --store "$STORE" --run $r "$TMP/restored-$how"
        [ -s "$TMP/restored-$how/params" ] || fail "$how: nothing restored"
        run 1 verify --store "$STORE" --run $r
        grep -q "HEAD is damaged.*3 checkpoints its manifests show verify intact: the next commit rewrites HEAD" \
            "$TMP/err" || fail "$how: verify does not say how to recover"
        # the trainer resumes from the newest; its next save rewrites HEAD
        $T --run $r --steps 40 --every 10 --out "$TMP/o.bin" >"$TMP/trainer.log" 2>&1 ||
            fail "$how: trainer: $(cat "$TMP/trainer.log")"
        grep -q "resumed from step 30" "$TMP/trainer.log" || fail "$how: $(cat "$TMP/trainer.log")"
        grep -q "not committed\|failed" "$TMP/trainer.log" && fail "$how: $(cat "$TMP/trainer.log")"
        run 0 verify --store "$STORE" --run $r
        [ "$(steps $r)" = "40 30 20" ] || fail "$how: after the save: $(steps $r)"
        echo "HEAD $how: ls (--run, the runs table), restore from the manifests; verify exit 1 with the way out;" \
            "the trainer resumed at 30 and its save rewrote HEAD"
    done
    # Damaged again: ckptrun run rewrites HEAD when it takes the lease.
    echo garbage >"$TMP/store/h-empty/HEAD"
    run 0 run --store "$STORE" --run h-empty --dir "$TMP/ck" -- \
        $T --run h-empty --steps 40 --every 10 --out "$TMP/o.bin"
    grep -q "HEAD rewritten from its manifests" "$TMP/err" || fail "run: no rewrite"
    grep -q "resumed from step 40" "$TMP/out" || fail "run: not resumed"
    head -c 40 "$TMP/store/h-empty/HEAD" | grep -q '"kind":"head"' || fail "run: HEAD not rewritten"
    run 0 verify --store "$STORE" --run h-empty
    echo "HEAD garbage under ckptrun run: rewritten when it took the lease, trainer resumed"
    ;;

ranks)
    $T --run r --steps 20 --every 10 --out "$TMP/o.bin" >"$TMP/trainer.log" 2>&1 ||
        fail "trainer: $(cat "$TMP/trainer.log")"
    m=$TMP/store/r/$(manifest_of r 20)
    reseal "$m" 'j["world_size"] = 2; assert j["format"] == 1'
    run 1 verify --store "$STORE" --run r
    grep -q "only format 4 has ranks" "$TMP/err" || fail "verify: not the reason"
    grep -q "newer format\|upgrade" "$TMP/err" && fail "verify: called it a newer format"
    $T --run r --steps 40 --every 10 --out "$TMP/o.bin" >"$TMP/trainer.log" 2>&1 ||
        fail "trainer: $(cat "$TMP/trainer.log")"
    grep -q "resumed from step 10" "$TMP/trainer.log" || fail "$(cat "$TMP/trainer.log")"
    grep -q "not committed\|failed\|newer" "$TMP/trainer.log" && fail "$(cat "$TMP/trainer.log")"
    [ "$(steps r)" = "40 30 20" ] || fail "after: $(steps r)"
    run 0 verify --store "$STORE" --run r
    echo "format-1 manifest of 2 ranks: verify says damaged; the trainer resumed at 10," \
        "committed 20, 30, 40 above it"
    ;;
*)
    echo "unknown case $CASE"; exit 64 ;;
esac
exit 0
