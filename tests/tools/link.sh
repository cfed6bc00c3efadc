# link.sh -- an emulated link to an object store, made and removed by the
# caller (bash, sourced): s3rver in a network namespace of its own, reached
# over a veth pair whose two ends are shaped by tc tbf (the link's total
# rate, each direction), through tests/tools/linkproxy on loopback (the
# round trip, and a rate cap per connection). netem, fq and sfq are not in
# every kernel (not in the one this was written on), so the proxy does what
# they would.
#
#   source tests/tools/link.sh
#   link_check                      # 0, or 1 with the reason in $LINK_WHY
#   link_up NAME RATE RTT_MS CONN_RATE DIR
#       RATE: tc's syntax (1gbit, 300mbit); CONN_RATE bytes/s, 0 = none;
#       DIR: an empty directory for s3rver's data and the logs.
#       Sets LINK_ENDPOINT (http://127.0.0.1:PORT, the proxy), LINK_PROXY_PID,
#       LINK_S3_PID, LINK_NS, LINK_DATA (s3rver's directory). Buckets: bench,
#       ckpt-test.
#   link_down                       # idempotent; call it from an EXIT trap
#   link_proxy_cpu                  # the proxy's CPU seconds so far
#
# Needs root (network namespaces), iproute2's ip and tc, node with s3rver
# (tests/npm) and the linkproxy binary ($LINK_PROXY_BIN, else
# $CKPT_BUILD/tests/linkproxy). Addresses: a /30 of 100.127.0.0/16 between
# this namespace and the new one, nothing routed beyond them; clients reach
# the store only through 127.0.0.1. Every name carries the caller's PID, so
# concurrent callers do not collide.

LINK_NS="" LINK_HOST_IF="" LINK_PROXY_PID="" LINK_S3_PID="" LINK_ENDPOINT="" LINK_WHY=""

link__src() { cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd; }

link_check() {
  local src; src=$(link__src)
  LINK_WHY=""
  if [[ $(id -u) != 0 ]]; then
    LINK_WHY="not root: network namespaces need CAP_NET_ADMIN"
  elif ! command -v ip > /dev/null || ! command -v tc > /dev/null; then
    LINK_WHY="iproute2 (ip, tc) not installed"
  elif ! command -v node > /dev/null || [[ ! -d "$src/tests/npm/node_modules/s3rver" ]]; then
    LINK_WHY="node or tests/npm/node_modules/s3rver missing (make test-peers)"
  elif ! ip netns add "ckptlinkprobe$$" 2> /dev/null; then
    LINK_WHY="ip netns add failed (no network namespaces here)"
  else
    ip netns del "ckptlinkprobe$$" 2> /dev/null
    return 0
  fi
  return 1
}

# A /30 of 100.127.0.0/16 that no interface here holds.
link__subnet() {
  local i n
  for i in $(seq 0 63); do
    n=$(( ($$ + i * 7) % 16384 ))
    LINK_A="100.127.$((n / 64)).$(( (n % 64) * 4 + 1 ))"
    LINK_B="100.127.$((n / 64)).$(( (n % 64) * 4 + 2 ))"
    ip -o -4 addr show | grep -qE " ($LINK_A|$LINK_B)/" || return 0
  done
  return 1
}

link_up() {
  local name=$1 rate=$2 rtt=$3 crate=$4 dir=$5 src port i bin
  src=$(link__src)
  bin=${LINK_PROXY_BIN:-${CKPT_BUILD:-$src/build}/tests/linkproxy}
  [[ -x "$bin" ]] || { LINK_WHY="linkproxy not built ($bin)"; return 1; }
  link__subnet || { LINK_WHY="no free /30 in 100.127.0.0/16"; return 1; }
  LINK_NS="ckptlink-$name-$$"
  LINK_HOST_IF="ckl$$h"
  mkdir -p "$dir/data"
  LINK_DATA="$dir/data"
  ip netns add "$LINK_NS" &&
    ip link add "$LINK_HOST_IF" type veth peer name "ckl$$n" &&
    ip link set "ckl$$n" netns "$LINK_NS" &&
    ip addr add "$LINK_A/30" dev "$LINK_HOST_IF" &&
    ip link set "$LINK_HOST_IF" up &&
    ip -n "$LINK_NS" addr add "$LINK_B/30" dev "ckl$$n" &&
    ip -n "$LINK_NS" link set "ckl$$n" up &&
    ip -n "$LINK_NS" link set lo up || { LINK_WHY="could not make the veth pair"; return 1; }
  # The total rate, each way: tbf on each end's egress. The burst (512 KiB,
  # a few ms at these rates) covers the veth's segmentation-offload
  # packets; the queue holds 20 ms, as a router's would.
  tc qdisc add dev "$LINK_HOST_IF" root tbf rate "$rate" burst 512kb latency 20ms &&
    tc -n "$LINK_NS" qdisc add dev "ckl$$n" root tbf rate "$rate" burst 512kb latency 20ms ||
    { LINK_WHY="tc tbf refused"; return 1; }
  port=4568
  ip netns exec "$LINK_NS" node --openssl-legacy-provider \
    "$src/tests/npm/node_modules/s3rver/bin/s3rver.js" -d "$dir/data" -a "$LINK_B" -p "$port" \
    --configure-bucket bench --configure-bucket ckpt-test > "$dir/s3rver.log" 2>&1 &
  LINK_S3_PID=$!
  "$bin" --upstream "$LINK_B:$port" --rtt-ms "$rtt" --conn-rate "$crate" \
    --stats "$dir/proxy.stats" > "$dir/proxy.out" 2> "$dir/proxy.log" &
  LINK_PROXY_PID=$!
  for i in $(seq 200); do
    [[ -z "${LINK_PORT:-}" ]] && LINK_PORT=$(awk '/^PORT/{print $2}' "$dir/proxy.out")
    if [[ -n "${LINK_PORT:-}" ]] &&
       curl -s -o /dev/null --noproxy '*' "http://127.0.0.1:$LINK_PORT/"; then
      LINK_ENDPOINT="http://127.0.0.1:$LINK_PORT"
      return 0
    fi
    kill -0 "$LINK_S3_PID" 2> /dev/null || break
    sleep 0.1
  done
  LINK_WHY="s3rver behind the link did not answer: $(tail -3 "$dir/s3rver.log")"
  return 1
}

link_proxy_cpu() {
  local t
  [[ -n "$LINK_PROXY_PID" && -r /proc/$LINK_PROXY_PID/stat ]] || { echo 0; return; }
  # utime + stime (fields 14, 15) in clock ticks; the name (field 2) has no blank
  t=$(awk '{print $14 + $15}' "/proc/$LINK_PROXY_PID/stat")
  echo "scale=2; $t / $(getconf CLK_TCK)" | bc
}

link_down() {
  # every step may fail (already gone) without stopping the others, also
  # under `set -e` (a process killed by SIGTERM is waited for as 143)
  if [[ -n "$LINK_PROXY_PID" ]]; then
    kill "$LINK_PROXY_PID" 2> /dev/null || true
    wait "$LINK_PROXY_PID" 2> /dev/null || true
  fi
  if [[ -n "$LINK_S3_PID" ]]; then
    kill "$LINK_S3_PID" 2> /dev/null || true
    wait "$LINK_S3_PID" 2> /dev/null || true
  fi
  if [[ -n "$LINK_NS" ]]; then
    ip netns del "$LINK_NS" 2> /dev/null || true
  fi
  if [[ -n "$LINK_HOST_IF" ]]; then
    ip link del "$LINK_HOST_IF" 2> /dev/null || true
  fi
  LINK_NS="" LINK_HOST_IF="" LINK_PROXY_PID="" LINK_S3_PID="" LINK_ENDPOINT="" LINK_PORT=""
  return 0
}
