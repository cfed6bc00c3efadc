#!/usr/bin/env bash
# Upload and download of 1 GiB to s3rver on loopback: ckpt (ckptrun save /
# restore, parallel connections) against `aws s3 cp` and `curl -T` /
# `curl -o` of the same bytes to the same server, in the same run. The bytes
# are random (incompressible), so this measures transfer, not compression.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bin"
npm="$src/tests/npm/node_modules"
mb=${BENCH_S3_MB:-1024}
if ! command -v node > /dev/null || [[ ! -d "$npm/s3rver" ]]; then
  echo "s3 bench: s3rver missing (make test-peers): skipped"; exit 0
fi
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
export HOME="$work/home" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_EC2_METADATA_DISABLED=true
export CKPT_S3_CONDITIONAL=0
ms() { local t0; t0=$(date +%s%N); "$@" > "$work/cmd.log" 2>&1 || { cat "$work/cmd.log"; return 1; }; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
rss() { /usr/bin/time -f %M "$@" 2>&1 > /dev/null | tail -1; }

sync
up_ckpt=$(ms "$bin/ckptrun" save --store s3://bench/ckpt --run b --codec none -q --step 1 "$work/in/state.bin")
down_ckpt=$(ms "$bin/ckptrun" restore --store s3://bench/ckpt --run b -q "$work/out-ckpt")
cmp "$work/in/state.bin" "$work/out-ckpt/state.bin"
rss_ckpt=$(rss "$bin/ckptrun" save --store s3://bench/ckpt --run b2 --codec none -q --step 1 "$work/in/state.bin")
sync
up_curl=$(ms curl -sf -T "$work/in/state.bin" --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
  "http://127.0.0.1:$port/bench/curl/state.bin")
down_curl=$(ms curl -sf -o "$work/out-curl.bin" --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
  "http://127.0.0.1:$port/bench/curl/state.bin")
aws_bin=$(command -v aws || true)
if [[ -n "$aws_bin" ]]; then
  sync
  up_aws=$(ms aws s3 cp --only-show-errors "$work/in/state.bin" s3://bench/aws/state.bin)
  down_aws=$(ms aws s3 cp --only-show-errors s3://bench/aws/state.bin "$work/out-aws.bin")
fi
row() { printf '| %-30s | %8.1f MB/s | %8.1f MB/s %-10s | %6.3fx |\n' "$1" \
  "$(echo "scale=1; $mb * 1.048576 * 1000 / $2" | bc)" "$(echo "scale=1; $mb * 1.048576 * 1000 / $3" | bc)" "$4" \
  "$(echo "scale=3; $3 / $2" | bc)"; }
echo
echo "s3 bench: $mb MiB of random bytes to s3rver 3.7.1 on loopback"
printf '| %-30s | %-13s | %-24s | %-7s |\n' measure ckpt peer ratio
printf '|--------------------------------|---------------|--------------------------|---------|\n'
row "upload" "$up_ckpt" "$up_curl" "curl -T"
row "download (verified)" "$down_ckpt" "$down_curl" "curl -o"
if [[ -n "$aws_bin" ]]; then
  row "upload" "$up_ckpt" "$up_aws" "aws s3 cp"
  row "download (verified)" "$down_ckpt" "$down_aws" "aws s3 cp"
  echo "aws: $aws_bin ($(aws --version 2>&1 | cut -d' ' -f1))"
else
  echo "aws s3 cp: not installed (apt-get install awscli), row skipped"
fi
echo "ckptrun save peak RSS: $((rss_ckpt / 1024)) MiB for $mb MiB (bounded by connections x chunk size + buffers)"
