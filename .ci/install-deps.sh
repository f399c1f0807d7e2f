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
  libvirt-dev libpugixml-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  # fuzzing (libFuzzer with ASan/UBSan)
  clang libclang-rt-14-dev
  # virtualization runtime
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils ovmf
  seabios ipxe-qemu libxml2-utils
  # a virtual TPM 2.0 (libvirt runs swtpm, and swtpm_setup for its state)
  swtpm swtpm-tools
  # a user record for each VMI's own uid, which has no passwd entry, for libvirtd
  libnss-wrapper
  # networking
  iproute2 nftables dnsmasq-base
  # the passt binding (libvirt runs passt for the guest)
  passt
  # containerDisk and DataVolume images from registries (skopeo speaks the registry protocol)
  skopeo tar
  # test guest
  busybox-static cpio dosfstools mtools syslinux syslinux-common genisoimage
  # tpm2-tools' libcurl (the TSS libraries come from their .debs)
  libcurl3-gnutls
  # kvctl ssh and scp run the system's OpenSSH client; the test guest's ext4 data disks
  openssh-client e2fsprogs
  # tests (a registry on the test's own address, with htpasswd users)
  python3 curl procps psmisc openssl apache2-utils
)

# The virtualization stack: libvirt 11.3 and QEMU 10.0 from Debian's bookworm-backports, and only
# those packages (and seabios, which QEMU 10 needs) from there: every other backport keeps
# apt's default priority 100 and is never installed. KVNODE_STACK=stock keeps Debian 12's own
# libvirt 9.0 / QEMU 7.2, on which kvnode runs as well (docs/DESIGN.md, "The stack").
stack=${KVNODE_STACK:-backports}
case "$stack" in
  backports | stock) ;;
  *) echo "install-deps: KVNODE_STACK must be backports or stock, not \"$stack\"" >&2; exit 2 ;;
esac
stack_packages=(libvirt-dev libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
                qemu-system-x86 qemu-utils)
apt_changed=false
if [ "$stack" = backports ]; then
  sources=/etc/apt/sources.list.d/kvnode-bookworm-backports.sources
  want_sources='Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf '%s\n' "$want_sources" > "$sources"
    apt_changed=true
  fi
  pin=/etc/apt/preferences.d/kvnode-stack
  want_pin='Package: libvirt* qemu-* seabios
Pin: release n=bookworm-backports
Pin-Priority: 500'
  if [ "$(cat "$pin" 2>/dev/null)" != "$want_pin" ]; then
    printf '%s\n' "$want_pin" > "$pin"
  fi
else
  rm -f /etc/apt/preferences.d/kvnode-stack
fi

# A package is missing when it is not installed, or (a stack package) not from the chosen stack.
is_backport() { case "$1" in *~bpo12*) return 0 ;; *) return 1 ;; esac; }
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
    continue
  fi
  case " ${stack_packages[*]} " in *" $p "*)
    if [ "$stack" = backports ] && ! is_backport "$(dpkg-query -W -f='${Version}' "$p")"; then
      missing+=("$p")
    fi
  esac
done
if [ "$stack" = stock ]; then
  # Back to Debian 12's stack: every installed backport of the pinned set, at once; those
  # that bookworm does not have (libvirt 11 split some packages out) go.
  while read -r p version status; do
    [ "$status" = installed ] && is_backport "$version" || continue
    if apt-cache madison "${p%%:*}" | grep -v backports | grep -q .; then
      missing+=("${p%%:*}/bookworm")
    else
      missing+=("${p%%:*}-")
    fi
  done < <(dpkg-query -W -f='${Package} ${Version} ${db:Status-Status}\n' 'libvirt*' 'qemu-*' \
             seabios 2>/dev/null)
fi
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  if $apt_changed || [ ! -f /var/lib/kvnode-apt-updated ] ||
     [ -n "$(find /var/lib/apt/lists -maxdepth 0 -mmin +1440)" ]; then
    apt-get update -qq
    touch /var/lib/kvnode-apt-updated
  fi
  extra=()
  if [ "$stack" = stock ]; then extra=(--allow-downgrades); fi
  apt-get install -y -qq --no-install-recommends "${extra[@]}" "${missing[@]}"
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

# Tools the tests run, taken out of Debian's packages (apt-get download, dpkg -x) without
# installing the packages, whose services would start: promtool (prometheus), which checks
# /metrics, and the registry (docker-registry) that the image pull tests run on their own
# address.
tools=/var/cache/kvnode-tools
extract_tool() {  # PACKAGE PATH-IN-PACKAGE NAME
  [ -x "$tools/$3" ] && return 0
  local work
  work=$(mktemp -d)
  chmod 0755 "$work"  # apt downloads as _apt
  if ! (cd "$work" && apt-get download -qq "$1"); then
    apt-get update -qq
    (cd "$work" && apt-get download -qq "$1")
  fi
  dpkg -x "$work"/"$1"_*.deb "$work/x"
  mkdir -p "$tools"
  install -m 0755 "$work/x/$2" "$tools/$3"
  rm -rf "$work"
}
extract_tool prometheus usr/bin/promtool promtool
extract_tool docker-registry usr/bin/docker-registry docker-registry
