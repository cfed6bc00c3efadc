#!/usr/bin/env bash
# Multi-rank saves of one replicated state (docs/multirank.md): mpi_bench
# under `mpirun -np N` for N = 1, 2, 4, the same BENCH_MPI_MB MiB (default
# 256) of random bytes on every rank, on the file store and on s3rver
# (loopback, a free port). Per configuration, the median of
# BENCH_MPI_ROUNDS (default 3) rounds of:
#   save   aggregate save time: barrier, ckpt_save, ckpt_wait on every rank
#          (the global commit); the peer is the 1-rank save of the same state
#   sent   bytes each rank moved to the store (most-loaded rank) against the
#          target state/N + one pack (32 MiB on object stores; one chunk,
#          4 MiB, on file://, which has no packs), and all ranks' sum
#          against the state (replicated chunks are written once, not N times)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin"
npm="$src/tests/npm/node_modules"
mb=${BENCH_MPI_MB:-256}
rounds=${BENCH_MPI_ROUNDS:-3}
if [[ ! -x "$bin/mpi_bench" ]]; then
  echo "mpi bench: mpi_bench not built (CMake found no MPI: libopenmpi-dev): skipped"; exit 0
fi
if ! command -v mpirun > /dev/null; then
  echo "mpi bench: mpirun missing (openmpi-bin): skipped"; exit 0
fi
work=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export OMPI_MCA_btl="self,vader,tcp" OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export HOME="$work/home" CKPT_NOTICE=none
unset CKPT_SOCKET CKPT_STORE CKPT_RUN
mkdir -p "$work/home"

stores=("file://$work/store")
if command -v node > /dev/null && [[ -d "$npm/s3rver" ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/s3"
  node --openssl-legacy-provider "$npm/s3rver/bin/s3rver.js" -d "$work/s3" -a 127.0.0.1 \
    -p "$port" --configure-bucket bench > "$work/s3rver.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_EC2_METADATA_DISABLED=true
  export CKPT_S3_CONDITIONAL=0   # s3rver ignores conditional writes (SPEC.md)
  stores+=("s3://bench/mpi")
else
  echo "mpi bench: s3rver missing (make test-peers): s3 rows skipped"
fi

# one line per (store, ranks, round) in $work/res: store ranks ms sent_max sent_min sent_sum
for r in $(seq "$rounds"); do
  for s in "${stores[@]}"; do
    for n in 1 2 4; do
      line=$(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
        "$bin/mpi_bench" --mb "$mb" --store "$s" --run "n$n-r$r") ||
        { echo "mpi bench: $n ranks on $s failed"; exit 1; }
      kind=${s%%:*}
      echo "$line" | awk -v k="$kind" '{for (i = 2; i <= NF; i++) {split($i, a, "="); v[a[1]] = a[2]}
        print k, v["ranks"], v["ms"], v["sent_max"], v["sent_min"], v["sent_sum"]}' >> "$work/res"
    done
  done
done

# median KIND RANKS FIELD (3 ms, 4 sent_max, 5 sent_min, 6 sent_sum)
median() { awk -v k="$1" -v n="$2" -v f="$3" '$1 == k && $2 == n {print $f}' "$work/res" |
  sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bytes=$((mb << 20))
echo
echo "mpi bench: $mb MiB replicated state (4 items, random bytes, codec none), saved by 1, 2 and 4"
echo "ranks on this host ($(nproc) cores), median of $rounds rounds; peer: the same save by 1 rank"
printf '| %-7s | %-5s | %-10s | %-9s | %-9s | %-11s | %-21s | %-7s | %-9s |\n' store ranks \
  "save s" "MB/s" "vs 1 rank" "sent/rank" "target (1/N + pack)" "sent/tg" "sum/state"
printf '|---------|-------|------------|-----------|-----------|-------------|-----------------------|---------|-----------|\n'
for s in "${stores[@]}"; do
  kind=${s%%:*}
  slack=$((4 << 20)); [[ "$kind" == s3 ]] && slack=$((32 << 20))
  one=$(median "$kind" 1 3)
  for n in 1 2 4; do
    ms=$(median "$kind" "$n" 3); smax=$(median "$kind" "$n" 4); ssum=$(median "$kind" "$n" 6)
    target=$((bytes / n + slack))
    printf '| %-7s | %5d | %10.2f | %9.1f | %8.2fx | %7.1f MiB | %13.1f MiB     | %6.2fx | %8.2fx |\n' \
      "$kind" "$n" "$(echo "scale=3; $ms / 1000" | bc)" \
      "$(echo "scale=1; $bytes / 1048576 * 1.048576 * 1000 / $ms" | bc)" \
      "$(echo "scale=3; $one / $ms" | bc)" "$(echo "scale=1; $smax / 1048576" | bc)" \
      "$(echo "scale=1; $target / 1048576" | bc)" "$(echo "scale=3; $smax / $target" | bc)" \
      "$(echo "scale=3; $ssum / $bytes" | bc)"
  done
done
echo "vs 1 rank: the 1-rank save time / this save time (above 1: faster); sent/tg at most 1.00x"
echo "meets the target; sum/state near 1.00x: the replicated chunks went up once in all"
