#!/usr/bin/env bash
# From a fresh Debian 12 machine to a booted VM, as root: installs the dependencies, builds
# kvnode, builds the test guest from Debian packages, starts kvnode-handler with its embedded
# defaults (state in /var/lib/kvnode, API on /run/kvnode/handler.sock, pod network 10.244.0.0/24
# on bridge kvnode0, TCG when KVM is not usable), uploads the guest disk into the PVC "app01-root"
# (kvctl image-upload),
# applies the app01 VirtualMachine (Halted), starts it, waits until it is Ready and shows
# `kvctl get vm,vmi`, the guest's console and an HTTP answer from the guest through masquerade.
#
# Every step it shows is checked: it exits non-zero naming the step when the VM is not Ready,
# the console lacks the guest's READY line or the guest's page does not answer. CI runs it
# (tests/e2e/quickstart-ci.sh) with a state dir and socket of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
state=${KVNODE_STATE_DIR:-/var/lib/kvnode}
socket=${KVNODE_SOCKET:-/run/kvnode/handler.sock}
pidfile=$(dirname "$socket")/handler.pid
export KVNODE_SOCKET=$socket
fail() {
  echo "quickstart: FAILED: $*" >&2
  exit 1
}

echo "== installing dependencies"
bash .ci/install-deps.sh
echo "== building"
# RelWithDebInfo unless build/ was configured otherwise (the test suite builds it without debug
# info; the quickstart then reuses that build instead of compiling everything again).
cmake -S . -B build -G Ninja >/dev/null
ninja -C build -j2 kvnode-handler kvnode-launcher kvctl
echo "== building the test guest"
bash tests/guest/build-guest.sh /var/cache/kvnode-guest/image >/dev/null

kvctl=$root/build/bin/kvctl
if ! $kvctl get vmi >/dev/null 2>&1; then
  echo "== starting kvnode-handler (log: /var/log/kvnode-handler.log)"
  mkdir -p "$(dirname "$socket")"
  setsid "$root/build/bin/kvnode-handler" --state-dir "$state" --socket "$socket" \
    >>/var/log/kvnode-handler.log 2>&1 < /dev/null &
  echo $! > "$pidfile"
  for _ in $(seq 1 100); do $kvctl get vmi >/dev/null 2>&1 && break; sleep 0.1; done
  $kvctl get vmi >/dev/null 2>&1 ||
    fail "the handler does not answer on $socket (its log: /var/log/kvnode-handler.log)"
fi

# The guest disk goes into the PVC app01-root as virtctl image-upload puts it (a disk left by an
# older quickstart in the same place is adopted as the claim instead).
if ! $kvctl -n apps get pvc app01-root >/dev/null 2>&1 &&
   [ ! -e "$state/volumes/apps/app01-root/disk.img" ]; then
  echo "== kvctl image-upload pvc app01-root --image-path guest.img --size 1Gi"
  $kvctl -n apps image-upload pvc app01-root --size 1Gi \
    --image-path /var/cache/kvnode-guest/image/guest.img | tail -1 ||
    fail "kvctl image-upload pvc app01-root"
fi

echo "== kvctl apply -f tests/e2e/app01.yaml && kvctl start app01"
$kvctl -n apps apply -f tests/e2e/app01.yaml || fail "kvctl apply -f tests/e2e/app01.yaml"
if ! out=$($kvctl -n apps start app01 2>&1); then
  # A second run finds it started already; anything else is a failure.
  grep -qE 'already running|does not support manual start' <<<"$out" || fail "kvctl start app01: $out"
fi
$kvctl -n apps wait vm/app01 --for=condition=Ready --timeout=180s ||
  fail "the VM app01 is not Ready after 180 s ($($kvctl -n apps get vm,vmi 2>&1 | tr '\n' ' '))"
echo "== kvctl get vm,vmi"
$kvctl -n apps get vm,vmi
echo "== the guest's serial console (kvctl logs vmi app01 --console)"
ready=""
for _ in $(seq 1 90); do
  $kvctl -n apps logs vmi app01 --console | grep -q KVNODE-GUEST-READY && { ready=1; break; }
  sleep 1
done
[ -n "$ready" ] || fail "the guest's console shows no KVNODE-GUEST-READY line after 90 s"
$kvctl -n apps logs vmi app01 --console | tr -d '\r' |
  grep -E 'KVNODE-GUEST-(BOOTED|IP|HOSTNAME|READY)'
ip=$($kvctl -n apps get vmi app01 -o json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["interfaces"][0]["ipAddress"])') ||
  fail "the VMI app01 has no interface with an IP address"
echo "== curl http://$ip/ (the guest's web server, through the pod network)"
page=""
for _ in $(seq 1 60); do page=$(curl -sf --max-time 3 "http://$ip/") && break; sleep 2; done
[ -n "$page" ] || fail "the guest's web server did not answer at http://$ip/ for 2 minutes"
echo "$page"
echo
echo "The VM runs. Try: kvctl -n apps describe vm app01 | kvctl -n apps console app01 (Ctrl+]"
echo "detaches) | kvctl -n apps stop app01 (graceful ACPI shutdown). Stop the handler with:"
echo "  kill \$(cat $pidfile)   # guests keep running"
