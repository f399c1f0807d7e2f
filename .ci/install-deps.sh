#!/usr/bin/env bash
# Installs every Debian 12 package kvnode needs to build, test and run. Idempotent: packages
# already present are left alone, and a second run changes nothing.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git
  # libraries
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libspdlog-dev libfmt-dev libyaml-dev libyaml-cpp-dev libxml2-dev libsqlite3-dev libsystemd-dev
  libvirt-dev libpugixml-dev libgtest-dev libgmock-dev libbenchmark-dev
  # fuzzing (libFuzzer with ASan/UBSan)
  clang libclang-rt-14-dev
  # virtualization runtime
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils ovmf
  seabios ipxe-qemu libxml2-utils
  # a user record for each VMI's own uid, which has no passwd entry, for libvirtd
  libnss-wrapper
  # networking
  iproute2 nftables dnsmasq-base
  # test guest
  busybox-static cpio dosfstools mtools syslinux syslinux-common genisoimage
  # tests
  python3 curl procps psmisc openssl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /var/lib/kvnode-apt-updated ] || [ -n "$(find /var/lib/apt/lists -maxdepth 0 -mmin +1440)" ]; then
    apt-get update -qq
    touch /var/lib/kvnode-apt-updated
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The operators' group that may use the handler's API socket (no launcher, libvirtd or QEMU ever
# holds it: each VMI runs under an id of its own from --launcher-id-range). The user kvnode is
# only the benchmarks' floors' (plain libvirtd and QEMU run as an unprivileged user).
getent group kvm >/dev/null || groupadd --system kvm
getent group kvnode >/dev/null || groupadd --system kvnode
getent group kvnode-admin >/dev/null || groupadd --system kvnode-admin
if ! getent passwd kvnode >/dev/null; then
  useradd --system --gid kvnode --groups kvm --home-dir /nonexistent --shell /usr/sbin/nologin kvnode
fi

# promtool, which the tests use to check /metrics: taken out of Debian's prometheus package
# (apt-get download, dpkg -x) without installing or starting the Prometheus server.
tools=/var/cache/kvnode-tools
if [ ! -x "$tools/promtool" ]; then
  work=$(mktemp -d)
  chmod 0755 "$work"  # apt downloads as _apt
  if ! (cd "$work" && apt-get download -qq prometheus); then
    apt-get update -qq
    (cd "$work" && apt-get download -qq prometheus)
  fi
  dpkg -x "$work"/prometheus_*.deb "$work/x"
  mkdir -p "$tools"
  install -m 0755 "$work/x/usr/bin/promtool" "$tools/promtool"
  rm -rf "$work"
fi
