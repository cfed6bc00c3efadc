#!/usr/bin/env bash
# Install the Debian packages ckpt needs, only those missing. As root this
# runs apt-get; otherwise it prints the exact command to run.
#   scripts/deps.sh          build and test dependencies
#   scripts/deps.sh --bench  also the benchmark peers (awscli, GNU time)
set -euo pipefail
pkgs=(build-essential cmake pkg-config
      libzstd-dev liblz4-dev libxxhash-dev libcjson-dev libssl-dev
      libcurl4-openssl-dev libexpat1-dev libcmocka-dev libisal-dev
      zstd lz4 curl python3 python3-torch python3-numpy
      slurm-wlm munge openmpi-bin libopenmpi-dev
      bsdutils groff-base)  # script(1) for the terminal tests, groff to check the man page
[[ "${1:-}" == --bench ]] && pkgs+=(awscli time)
missing=()
# Node.js and npm (for the s3rver/azurite test peers): any install will do,
# e.g. a nodejs package that bundles npm; take Debian's only when absent.
command -v node > /dev/null || missing+=(nodejs)
command -v npm > /dev/null || missing+=(npm)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "deps: all system packages present"
  exit 0
fi
echo "deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: run as root:  apt-get update && apt-get install -y ${missing[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
