#!/usr/bin/env bash
# From a fresh Debian 12 machine to a booted VM, as root: installs the dependencies, builds
# kvnode, builds the test guest from Debian packages, starts kvnode-handler with its embedded
# defaults (state in /var/lib/kvnode, API on /run/kvnode/handler.sock, TCG when KVM is not
# usable), puts the guest disk in the PVC "demo-root", applies a VirtualMachineInstance, waits
# until it is Ready and shows it with its serial console.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
state=${KVNODE_STATE_DIR:-/var/lib/kvnode}
socket=${KVNODE_SOCKET:-/run/kvnode/handler.sock}
export KVNODE_SOCKET=$socket

echo "== installing dependencies"
bash .ci/install-deps.sh
echo "== building"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j2 kvnode-handler kvnode-launcher kvctl
echo "== building the test guest"
bash tests/guest/build-guest.sh /var/cache/kvnode-guest/image >/dev/null

kvctl=$root/build/bin/kvctl
if ! $kvctl get vmi >/dev/null 2>&1; then
  echo "== starting kvnode-handler (log: /var/log/kvnode-handler.log)"
  mkdir -p /run/kvnode
  setsid "$root/build/bin/kvnode-handler" --state-dir "$state" --socket "$socket" \
    >>/var/log/kvnode-handler.log 2>&1 < /dev/null &
  echo $! > /run/kvnode/handler.pid
  for _ in $(seq 1 100); do $kvctl get vmi >/dev/null 2>&1 && break; sleep 0.1; done
fi

disk=$state/volumes/default/demo-root/disk.img
if [ ! -f "$disk" ]; then
  mkdir -p "$(dirname "$disk")"
  cp --sparse=always /var/cache/kvnode-guest/image/guest.img "$disk"
fi

echo "== kvctl apply -f tests/e2e/demo-vmi.yaml"
$kvctl apply -f tests/e2e/demo-vmi.yaml
$kvctl wait vmi/demo --for=condition=Ready --timeout=120s
echo "== kvctl get vmi"
$kvctl get vmi
echo "== serial console (kvctl console demo)"
timeout 15 $kvctl console demo < /dev/null | tr -d '\r' | grep -m 4 KVNODE-GUEST || true
echo
echo "The VM runs. Try: kvctl describe vmi demo | kvctl console demo (Ctrl+] detaches) |"
echo "kvctl delete vmi demo (graceful ACPI shutdown). Stop the handler with:"
echo "  kill \$(cat /run/kvnode/handler.pid)   # guests keep running"
