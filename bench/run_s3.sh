#!/usr/bin/env bash
# Upload and download of 1 GiB to s3rver on loopback: ckpt (ckptrun save /
# restore: parallel connections, every chunk verified; with --sync the
# restored file is also made durable) against `aws s3 cp` (Debian's awscli) and `curl -T` / `curl -o` of
# the same bytes to the same server, in the same run. The bytes are random
# (incompressible): this measures transfer, not compression.
#
# Three rounds, the tools alternating inside each round (and which goes
# first alternating between rounds); each figure is the
# median of its three (this VM's page cache and CPU steal move single runs
# by +-30%). CPU is the client's user+sys seconds (GNU time), RSS its peak.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin"
npm="$src/tests/npm/node_modules"
mb=${BENCH_S3_MB:-1024}
rounds=${BENCH_S3_ROUNDS:-3}
if ! command -v node > /dev/null || [[ ! -d "$npm/s3rver" ]]; then
  echo "s3 bench: s3rver missing (make test-peers): skipped"; exit 0
fi
if [[ ! -x /usr/bin/time ]]; then
  echo "s3 bench: GNU time missing (scripts/deps.sh --bench): skipped"; exit 0
fi
# Debian's awscli (/usr/bin/aws), not whatever `aws` comes first on PATH.
aws_bin=/usr/bin/aws
[[ -x "$aws_bin" ]] || aws_bin=$(command -v aws || true)
# --endpoint-url on every call: awscli before 2.13 ignores AWS_ENDPOINT_URL
# and would go to the real AWS endpoint.
work=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/data" "$work/in" "$work/home"
node --openssl-legacy-provider "$npm/s3rver/bin/s3rver.js" -d "$work/data" -a 127.0.0.1 \
  -p "$port" --configure-bucket bench > "$work/s3rver.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
head -c $((mb << 20)) /dev/urandom > "$work/in/state.bin"
# The same bytes as 32 MiB pieces (ckpt's pack size on object stores), for
# curl -Z with 4 transfers at once (ckpt's packs in flight): many objects in
# parallel is ckpt's request pattern, and s3rver spends CPU per request, so
# this is the ceiling any client writing such objects meets.
mkdir -p "$work/parts" "$work/zdown"
split -b 33554432 -d -a 4 "$work/in/state.bin" "$work/parts/p"
export HOME="$work/home" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_EC2_METADATA_DISABLED=true
export CKPT_S3_CONDITIONAL=0   # s3rver ignores conditional writes (SPEC.md)
export PYTHONDONTWRITEBYTECODE=1

# measure NAME CMD...: one run; appends "wall_ms cpu_ms rss_kb" to $work/NAME.
measure() {
  local name=$1; shift
  sync
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" > "$work/cmd.log" 2>&1 ||
    { cat "$work/cmd.log"; echo "s3 bench: $name failed"; exit 1; }
  awk '{printf "%d %d %d\n", $1 * 1000, ($2 + $3) * 1000, $4}' "$work/time" >> "$work/$name"
}
# median NAME FIELD(1 wall, 2 cpu, 3 rss)
median() { awk -v f="$2" '{print $f}' "$work/$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
curl_s3=(curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER
         -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
# Object PUTs carry Content-MD5 on custom endpoints (this one) and CRC32C on
# AWS's own; both are measured when the build has ISA-L.
crc=""
CKPT_S3_CHECKSUM=crc32c "$bin/ckptrun" ls --store s3://bench/probe > /dev/null 2>&1 && crc=1
# Each round's tools in turn; odd rounds run ckpt first, even rounds its
# peers first. The order matters here: this VM hands freed memory back to
# its host (free page reporting), and the first write into such a page
# costs ~8 us (2.2 s per GiB measured), so whichever tool writes first after
# the previous round's objects were removed can meet colder page cache.
up_ckpt() {
  measure ckpt_up "$bin/ckptrun" save --store s3://bench/ckpt --run "r$r" --codec none -q \
    --step 1 "$work/in/state.bin"
  if [[ -n "$crc" ]]; then
    CKPT_S3_CHECKSUM=crc32c measure ckpt_up_crc "$bin/ckptrun" save --store s3://bench/ckpt \
      --run "c$r" --codec none -q --step 1 "$work/in/state.bin"
  fi
}
up_peers() {
  measure curl_up "${curl_s3[@]}" -T "$work/in/state.bin" "http://127.0.0.1:$port/bench/curl/s$r"
  measure curlz_up "${curl_s3[@]}" -Z --parallel-max 4 "${zup[@]}"
  [[ -n "$aws_bin" ]] && measure aws_up "$aws_bin" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp \
    --only-show-errors "$work/in/state.bin" "s3://bench/aws/s$r"
  return 0
}
down_ckpt() {
  rm -rf "$work/out"
  measure ckpt_down "$bin/ckptrun" restore --store s3://bench/ckpt --run "r$r" -q "$work/out"
  cmp "$work/in/state.bin" "$work/out/state.bin"
  rm -rf "$work/out"
  measure ckpt_down_sync "$bin/ckptrun" restore --sync --store s3://bench/ckpt --run "r$r" -q "$work/out"
  cmp "$work/in/state.bin" "$work/out/state.bin"
  rm -rf "$work/out"
}
down_peers() {
  rm -f "$work/o.bin"
  measure curl_down "${curl_s3[@]}" -o "$work/o.bin" "http://127.0.0.1:$port/bench/curl/s$r"
  rm -f "$work/o.bin"
  measure curlz_down "${curl_s3[@]}" -Z --parallel-max 8 "${zdown[@]}"
  rm -f "$work"/zdown/*
  measure curl_down_sync sh -c "$(printf '%q ' "${curl_s3[@]}") -o '$work/o.bin' \
    'http://127.0.0.1:$port/bench/curl/s$r' && sync '$work/o.bin'"
  rm -f "$work/o.bin"
  if [[ -n "$aws_bin" ]]; then
    measure aws_down "$aws_bin" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --only-show-errors "s3://bench/aws/s$r" "$work/o.bin"
    cmp "$work/in/state.bin" "$work/o.bin"
    rm -f "$work/o.bin"
  fi
}
for r in $(seq "$rounds"); do
  zup=() zdown=()
  for f in "$work"/parts/p*; do
    zup+=(-T "$f" "http://127.0.0.1:$port/bench/z$r/${f##*/}")
    zdown+=(-o "$work/zdown/${f##*/}" "http://127.0.0.1:$port/bench/z$r/${f##*/}")
  done
  if (( r % 2 )); then
    up_ckpt; up_peers; down_ckpt; down_peers
  else
    up_peers; up_ckpt; down_peers; down_ckpt
  fi
  # The round's objects go: five rounds of five 1 GiB objects outgrow the
  # page cache of a 24 GiB machine, and a download whose object was evicted
  # first (ckpt's: uploaded first in its round) would be read from disk by
  # the server while its peer's still came from memory.
  rm -rf "$work/data/bench/ckpt/r$r" "$work/data/bench/ckpt/c$r" "$work/data/bench/z$r" \
    "$work/data/bench/curl/s$r"._S3rver_* "$work/data/bench/aws/s$r"._S3rver_*
done

mbs() { echo "scale=1; $mb * 1.048576 * 1000 / $1" | bc; }
row() { # label ours peer peer-label [target]
  local a b ca cb
  a=$(median "$2" 1); b=$(median "$3" 1); ca=$(median "$2" 2); cb=$(median "$3" 2)
  printf '| %-22s | %7.1f MB/s %5.2fs | %-26s | %7.1f MB/s %5.2fs | %6.3fx | %5.2fx | %-8s |\n' "$1" \
    "$(mbs "$a")" "$(echo "scale=2; $ca / 1000" | bc)" "$4" "$(mbs "$b")" \
    "$(echo "scale=2; $cb / 1000" | bc)" "$(echo "scale=3; $b / $a" | bc)" \
    "$(echo "scale=2; $ca / $cb" | bc)" "${5:--}"
}
echo
echo "s3 bench: $mb MiB of random bytes to s3rver 3.7.1 on loopback, median of $rounds rounds"
echo "(throughput and client CPU seconds; ratio = ckpt speed / peer speed; cpu = ckpt CPU / peer CPU); load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-22s | %-20s | %-26s | %-20s | %-7s | %-6s | %-8s |\n' measure "ckpt" peer "peer" ratio cpu target
printf '|------------------------|----------------------|----------------------------|----------------------|---------|--------|----------|\n'
row "upload (Content-MD5)" ckpt_up curl_up "curl -T" ">= 1.00x"
[[ -n "$crc" ]] && row "upload (CRC32C, AWS)" ckpt_up_crc curl_up "curl -T" ">= 1.00x"
row "upload (Content-MD5)" ckpt_up curlz_up "curl -Z -T, 32 MiB objects"
[[ -n "$crc" ]] && row "upload (CRC32C, AWS)" ckpt_up_crc curlz_up "curl -Z -T, 32 MiB objects"
row "download (verified)" ckpt_down curl_down "curl -o" ">= 1.00x"
row "download --sync" ckpt_down_sync curl_down_sync "curl -o + sync (durable)"
row "download (verified)" ckpt_down curlz_down "curl -Z -o, 32 MiB objects"
if [[ -n "$aws_bin" ]]; then
  row "upload (Content-MD5)" ckpt_up aws_up "aws s3 cp"
  [[ -n "$crc" ]] && row "upload (CRC32C, AWS)" ckpt_up_crc aws_up "aws s3 cp"
  row "download (verified)" ckpt_down aws_down "aws s3 cp"
  echo "aws: $aws_bin ($("$aws_bin" --version 2>&1 | cut -d' ' -f1))"
else
  echo "aws s3 cp: not installed (scripts/deps.sh --bench installs awscli), rows skipped"
fi
echo "each round (wall ms, client CPU ms, peak RSS KiB):"
for f in "$work"/ckpt_* "$work"/curl* "$work"/aws_*; do
  [[ -f "$f" ]] && echo "  ${f##*/}: $(tr '\n' ';' < "$f")"
done
echo "peak RSS: ckptrun save $(( $(median ckpt_up 3) / 1024 )) MiB, restore $(( $(median ckpt_down 3) / 1024 )) MiB" \
  "for $mb MiB (bounded by packs in flight x pack size on save, workers x range on restore; aws s3 cp $(( $(median aws_up 3) / 1024 )) MiB)"
