#!/usr/bin/env bash
# Install the Debian packages a job needs, only those missing. As root this
# runs apt-get; otherwise it prints the exact command to run.
#
#   scripts/deps.sh [--demo] [--test] [--bench] [--ci] [--all] [--list]
#
#   --demo   what `make demo` needs: the compiler, cmake, pkg-config and the
#            libraries libckpt and ckptrun build against (object stores
#            included); examples/demo.sh itself needs only bash and
#            coreutils. No torch, SLURM, MPI or Node.js.
#   --test   (the default) --demo and what the tests need: cmocka, torch and
#            numpy, SLURM and munge, Open MPI, Node.js and npm (the s3rver
#            and Azurite peers), groff, the zstd/lz4/curl tools (`make test`)
#   --bench  the benchmark peers: awscli, GNU time (`make bench` adds them
#            to --test)
#   --ci     --test and clang (.ci/run's compile-only clang build)
#   --all    every set (`make deps`)
#   --list   print the packages of the sets asked for, one a line, and
#            install nothing (docs/testing.md: what each set costs on a
#            fresh Debian 12)
set -euo pipefail
demo=(build-essential cmake pkg-config
      libzstd-dev liblz4-dev libxxhash-dev libcjson-dev libssl-dev
      libcurl4-openssl-dev libexpat1-dev libisal-dev)
test=(libcmocka-dev
      zstd lz4 curl python3 python3-torch python3-numpy
      slurm-wlm munge openmpi-bin libopenmpi-dev
      bsdutils groff-base)  # script(1) for the terminal tests, groff to check the man page
bench=(awscli time)
ci=(clang)

want_demo=0 want_test=0 want_bench=0 want_ci=0 list=0
for a in "$@"; do
  case $a in
    --demo) want_demo=1 ;;
    --test) want_test=1 ;;
    --bench) want_bench=1 ;;
    --ci) want_test=1 want_ci=1 ;;
    --all) want_demo=1 want_test=1 want_bench=1 want_ci=1 ;;
    --list) list=1 ;;
    *) echo "deps: unknown argument '$a' (--demo, --test, --bench, --ci, --all, --list)" >&2
       exit 64 ;;
  esac
done
((want_demo + want_test + want_bench + want_ci)) || want_test=1
((want_test)) && want_demo=1  # the tests build everything the demo builds

pkgs=()
((want_demo)) && pkgs+=("${demo[@]}")
((want_test)) && pkgs+=("${test[@]}")
((want_bench)) && pkgs+=("${bench[@]}")
((want_ci)) && pkgs+=("${ci[@]}")
# Node.js and npm (for the s3rver/azurite peers of the tests and the
# benchmarks): any install will do, e.g. a nodejs package that bundles npm;
# take Debian's only when absent.
node=0
((want_test || want_bench)) && node=1

if ((list)); then
  printf '%s\n' "${pkgs[@]}"
  ((node)) && printf '%s\n' nodejs npm
  exit 0
fi
missing=()
if ((node)); then
  command -v node > /dev/null || missing+=(nodejs)
  command -v npm > /dev/null || missing+=(npm)
fi
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "deps: all system packages present"
  exit 0
fi
echo "deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: run as root:  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
