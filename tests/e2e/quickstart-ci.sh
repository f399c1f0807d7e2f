#!/usr/bin/env bash
# The README's first command as CI runs it (tests/run-all.sh, after the integration tests): the
# quickstart with a state dir and API socket of its own, on the pod CIDR and bridge it normally
# uses, and everything it made removed afterwards, also when it fails: the VM stopped and its
# VMI gone, the handler ended by its pid, the state dir and runtime dir, and the bridge and
# nftables tables if they were not there before.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
dir=$(mktemp -d /var/tmp/kvnode-quickstart-XXXXXX)
export KVNODE_STATE_DIR=$dir/state
export KVNODE_SOCKET=$dir/handler.sock
kvctl="$root/build/bin/kvctl --socket $KVNODE_SOCKET"
had_bridge=$(ip -o link show kvnode0 2>/dev/null || true)
tables_before=$(nft list tables 2>/dev/null || true)
run_dirs_before=$(ls /run/kvnode 2>/dev/null || true)

cleanup() {
  local status=$?
  set +e
  if [ -s "$dir/handler.pid" ]; then
    pid=$(cat "$dir/handler.pid")
    $kvctl -n apps stop app01 --grace-period 0 --force >/dev/null 2>&1
    $kvctl -n apps wait vmi/app01 --for=delete --timeout=60s >/dev/null 2>&1
    $kvctl -n apps delete vm app01 >/dev/null 2>&1
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
    if [ "$status" -ne 0 ]; then
      echo "== the handler's log (tail)"
      tail -n 40 /var/log/kvnode-handler.log
    fi
  fi
  [ -n "$had_bridge" ] || ip link del kvnode0 2>/dev/null
  # The handler's nftables tables (its NAT, the importer's egress fence) made by this run.
  nft list tables 2>/dev/null | while read -r _ family name; do
    grep -qx "table $family $name" <<<"$tables_before" || nft delete table "$family" "$name"
  done
  # The handler's runtime dir (/run/kvnode/<hash of the state dir>: notify socket, primer).
  for d in /run/kvnode/*; do
    [ -d "$d" ] || continue
    grep -qx "$(basename "$d")" <<<"$run_dirs_before" || rm -rf "$d"
  done
  rm -rf "$dir"
  exit "$status"
}
trap cleanup EXIT
bash tests/e2e/quickstart.sh
