#!/bin/bash
# test_trainer_exit.sh -- the example trainers never end a run as success
# when their final checkpoint did not commit (issue 26, "never a silent
# loss"): a script that powers the instance off on exit 0 would lose the
# work. Registered by tests/trainers.cmake.
#
#   test_trainer_exit.sh c|mpi|cuda
#
# Each trainer first trains to step 10 under lease epoch 5 (CKPT_EPOCH: as
# under a ckptrun holding the run's lease), then again to step 20 under
# epoch 1, a runner fenced out: it resumes from step 10 (restoring is not
# fenced) and trains, but its save of step 20 is refused. It must exit 74
# (ckptrun's "final checkpoint could not be committed"), saying so, with its
# --out written; the store still ends at step 10. Under epoch 5 again it
# resumes from 10, commits 20 and exits 0.
# Binaries from $CKPT_BIN; mpi needs mpirun, cuda a usable device (else
# exit 77: skipped).
set -u

KIND=$1
BIN=${CKPT_BIN:?CKPT_BIN is not set}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; cat "$TMP/log" 2>/dev/null; exit 1; }

for v in $(env | sed -n 's/^\(\(CKPT\|SLURM\|OMPI\|PMIX\|PMI\)_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done
export HOME=$TMP
STORE="file://$TMP/store"
case $KIND in
c)
    cmd=("$BIN/c_trainer" --hidden 64 --input 16 --quiet)
    ;;
cuda)
    [ -x "$BIN/cuda_trainer" ] || { echo "no cuda_trainer: skipped"; exit 77; }
    "$BIN/cuda_trainer" --check-device || exit 77
    cmd=("$BIN/cuda_trainer" --hidden 64 --input 16 --batch 4 --quiet)
    ;;
mpi)
    MPIRUN=$(command -v mpirun) || { echo "no mpirun: skipped"; exit 77; }
    [ -x "$BIN/mpi_trainer" ] || { echo "no mpi_trainer: skipped"; exit 77; }
    # Open MPI on loopback only, quietly (as tests/integration/test_mpi.py)
    export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo
    export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_base_warn_component_unused=0
    cmd=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2
         "$BIN/mpi_trainer" --hidden 64 --input 16 --batch 2 --quiet)
    ;;
*)
    echo "unknown kind $KIND"; exit 64 ;;
esac

# train EPOCH STEPS: the trainer's exit status; its output in $TMP/log
train() {
    rm -f "$TMP/out.bin"
    CKPT_EPOCH=$1 "${cmd[@]}" --store "$STORE" --run r --steps "$2" --every 10 \
        --out "$TMP/out.bin" >"$TMP/log" 2>&1
}

# newest: the newest committed step, as `ckptrun ls` lists it
newest() {
    "$BIN/ckptrun" ls --store "$STORE" --run r 2>/dev/null | awk 'NR == 2 { print $1 }'
}

train 5 10 || fail "the first run exited $?"
[ "$(newest)" = 10 ] || fail "the first run did not commit step 10"
train 1 20
rc=$?
[ "$rc" = 74 ] || fail "a run whose last save was refused exited $rc, not 74"
grep -q "resumed from step 10\|start at step 10" "$TMP/log" || fail "did not resume"
grep -q "last checkpoint not committed: .*fenced at epoch 5.* (exit 74)" "$TMP/log" ||
    fail "does not say why"
[ -s "$TMP/out.bin" ] || fail "no --out"
[ "$(newest)" = 10 ] || fail "the fenced run committed"
train 5 20 || fail "the holder's run exited $?"
[ "$(newest)" = 20 ] || fail "the holder's run did not commit step 20"
echo "$KIND trainer: exit 74 when its final save was refused (the store at step 10)," \
    "exit 0 once step 20 committed"
