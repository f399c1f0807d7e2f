#!/usr/bin/env bash
# build-guest.sh OUTDIR — builds the kvnode test guest, OUTDIR/guest.img: a raw disk holding one
# FAT filesystem (label KVNODEBOOT) with syslinux, a Debian cloud kernel and a busybox initramfs
# whose /init is tests/guest/rootfs/init, and systemd-boot at EFI/BOOT/BOOTX64.EFI with an entry
# for the same kernel and initramfs, so that it boots by BIOS and by UEFI.
# See tests/guest/README.md.
#
# Needs only Debian's apt mirror: the kernel .deb is fetched with `apt-get download` (never
# installed) and cached in ${KVNODE_GUEST_CACHE:-/var/cache/kvnode-guest}. A second run with
# nothing changed returns at once.
#
# Also leaves OUTDIR/vmlinuz, OUTDIR/initrd.gz and OUTDIR/cmdline (for direct kernel boot) and
# OUTDIR/guest.manifest (kernel, modules and their load order).
#
# Environment:
#   KVNODE_GUEST_CACHE             .deb cache (default /var/cache/kvnode-guest)
#   KVNODE_GUEST_KERNEL_FLAVOUR    cloud (default) or generic (linux-image-amd64: bigger, but has
#                                  the AHCI driver, i.e. SATA cdroms on q35)
#   KVNODE_GUEST_KERNEL_DEB        use this kernel .deb instead of asking apt
#   KVNODE_GUEST_AGENT_DEB         use this qemu-guest-agent .deb instead of asking apt
#   KVNODE_GUEST_IMAGE_MB          size of the image (default 64)
#   KVNODE_GUEST_CMDLINE_EXTRA     appended to the kernel command line
#   KVNODE_GUEST_FORCE=1           rebuild even if the image is up to date
#   KVNODE_GUEST_REUSE=1           an image built by this script from the same rootfs and settings
#                                  is used without asking apt for newer packages
set -euo pipefail

die() { echo "build-guest: $*" >&2; exit 1; }
log() { echo "build-guest: $*" >&2; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
mkdir -p "$1"
out=$(cd "$1" && pwd)
img="$out/guest.img"
cache=${KVNODE_GUEST_CACHE:-/var/cache/kvnode-guest}
flavour=${KVNODE_GUEST_KERNEL_FLAVOUR:-cloud}
img_mb=${KVNODE_GUEST_IMAGE_MB:-64}
busybox=/bin/busybox
# no_timer_check: under TCG on a loaded host (five guests booting at once on two cores) the
# kernel's check that the 8254 timer reaches the IO-APIC can miss its busy-wait window and panic
# with "IO-APIC + timer doesn't work" (seen once in CI). Cloud images boot virtual machines with
# the same switch.
cmdline="console=ttyS0,115200 panic=0 no_timer_check quiet ${KVNODE_GUEST_CMDLINE_EXTRA:-}"
cmdline=${cmdline% }

for tool in apt-cache apt-get dpkg-deb cpio gzip mkfs.vfat mcopy syslinux flock ldd ssh-keygen; do
	command -v "$tool" >/dev/null || die "missing $tool (apt-get install busybox-static cpio dosfstools mtools syslinux syslinux-common)"
done
# Read the whole list first: `--list | grep -q` lets busybox die of SIGPIPE, which pipefail
# turns into a spurious failure.
if ! [ -x "$busybox" ] || ! grep -qx udhcpc <<<"$("$busybox" --list)"; then
  die "$busybox is not busybox-static"
fi

# Builds of the same OUTDIR (parallel tests) wait for each other.
exec 9>"$out/.guest.lock"
flock 9

# KVNODE_GUEST_REUSE=1 (the test fixture): an image built from this script, rootfs and busybox
# with these settings is used as it is, without asking apt whether a package is newer (each
# test binary runs this script at its start).
if [ -n "${KVNODE_GUEST_REUSE:-}" ] && [ -z "${KVNODE_GUEST_FORCE:-}" ] && [ -s "$img" ] &&
	[ -f "$img.stamp" ] && [ -z "$(find -L "$self" "$here/rootfs" "$busybox" -newer "$img" -print -quit)" ] &&
	grep -q "^flavour=$flavour .* size_mb=$img_mb .*cmdline=$cmdline\$" "$img.stamp"; then
	log "$img is up to date (reused without asking apt)"
	exit 0
fi

# --- the kernel .deb ------------------------------------------------------------------------------
case "$flavour" in
cloud) meta=linux-image-cloud-amd64; pattern='linux-image-*-cloud-amd64_*_amd64.deb' ;;
generic) meta=linux-image-amd64; pattern='linux-image-[0-9]*[0-9]-amd64_*_amd64.deb' ;;
*) die "KVNODE_GUEST_KERNEL_FLAVOUR must be cloud or generic, not '$flavour'" ;;
esac
mkdir -p "$cache/debs"
# fetch_deb PACKAGE VERSION: the package's .deb in the cache (downloaded when missing), or
# nothing when apt cannot get it.
fetch_deb() {
	local file="${1}_${2//:/%3a}_amd64.deb"
	if [ ! -s "$cache/debs/$file" ]; then
		log "downloading $1 $2"
		(cd "$cache/debs" && apt-get download -q -o APT::Sandbox::User=root "$1=$2" >&2) ||
			log "apt-get download $1 failed; trying the cache"
	fi
	if [ -s "$cache/debs/$file" ]; then echo "$cache/debs/$file"; fi
}
# What apt knows of every package the guest takes, in one apt-cache call (without a
# pkgcache.bin each call costs about a second, and a test binary runs this script at its start):
# each package's version, and the kernel the metapackage depends on.
userland_packages=(qemu-guest-agent dropbear-bin libtomcrypt1 libtommath1 openssh-sftp-server
	tpm2-tools libtss2-esys-3.0.2-0 libtss2-mu0 libtss2-rc0 libtss2-sys1 libtss2-tctildr0
	libtss2-tcti-device0 systemd-boot-efi)
declare -A apt_version=()
kernel_dep=
while read -r kind name value; do
	case "$kind" in
	version) apt_version[$name]=$value ;;
	depends) [ "$name" = "$meta" ] && kernel_dep=$value ;;
	esac
done < <(apt-cache show --no-all-versions "$meta" "${userland_packages[@]}" 2>/dev/null |
	awk '/^Package: / {p = $2} /^Version: / {print "version", p, $2}
	     /^Depends: / {print "depends", p, substr($0, 10)}')
deb=${KVNODE_GUEST_KERNEL_DEB:-}
if [ -z "$deb" ]; then
	# The metapackage depends on exactly one real kernel package at one version, e.g.
	# "Depends: linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)".
	read -r pkg ver < <(echo "Depends: $kernel_dep" |
		sed -n 's/^Depends:.*\(linux-image-[0-9][^ ,]*\) (= \([^)]*\)).*/\1 \2/p' | head -n 1) || true
	if [ -n "${pkg:-}" ]; then deb=$(fetch_deb "$pkg" "$ver"); fi
	if [ -z "$deb" ]; then
		# No apt lists, or no mirror: the newest cached kernel of this flavour.
		# shellcheck disable=SC2086,SC2012 # $pattern is a glob; names are Debian package names
		deb=$(cd "$cache/debs" && ls -t $pattern 2>/dev/null |
			{ if [ "$flavour" = cloud ]; then cat; else grep -v -e '-cloud-amd64_' -e '-rt-amd64_'; fi; } |
			head -n 1 || true)
		[ -n "$deb" ] || die "no kernel: apt cannot get $meta (run apt-get update) and $cache/debs has none"
		deb="$cache/debs/$deb"
	fi
fi
[ -s "$deb" ] || die "kernel package $deb is missing"

# --- userland packages: Debian's qemu-guest-agent, and Dropbear with OpenSSH's sftp-server ---------
# package_deb NAME: the newest .deb of NAME apt knows (downloaded into the cache), else the newest
# one in the cache. NAME must be one of userland_packages (their versions are read above).
package_deb() {
	local ver found
	ver=${apt_version[$1]:-}
	if [ -n "$ver" ]; then found=$(fetch_deb "$1" "$ver"); fi
	if [ -z "${found:-}" ]; then
		# shellcheck disable=SC2012 # Debian package names
		found=$(cd "$cache/debs" && ls -t "${1}"_*_amd64.deb 2>/dev/null | head -n 1 || true)
		[ -n "$found" ] || die "no $1: apt cannot get it (run apt-get update) and $cache/debs has none"
		found="$cache/debs/$found"
	fi
	[ -s "$found" ] || die "package $found is missing"
	echo "$found"
}
agent_deb=${KVNODE_GUEST_AGENT_DEB:-$(package_deb qemu-guest-agent)}
[ -s "$agent_deb" ] || die "guest agent package $agent_deb is missing"
# The SSH server (kvctl ssh and scp reach it): dropbear needs libtomcrypt and libtommath, which
# the host need not have; sftp-server serves OpenSSH's scp (SFTP since OpenSSH 9.0).
ssh_debs=()
for p in dropbear-bin libtomcrypt1 libtommath1 openssh-sftp-server; do
	ssh_debs+=("$(package_deb "$p")")
done
# tpm2-tools and the TSS libraries it links (and the device TCTI it loads with dlopen): put on
# the boot disk as tpm2.cpio.gz, which /init unpacks only when the guest has a TPM.
tpm_debs=()
for p in tpm2-tools libtss2-esys-3.0.2-0 libtss2-mu0 libtss2-rc0 libtss2-sys1 libtss2-tctildr0 \
	libtss2-tcti-device0; do
	tpm_debs+=("$(package_deb "$p")")
done
# systemd-boot (never installed): the UEFI boot loader.
efi_loader_deb=$(package_deb systemd-boot-efi)

# --- up to date? -----------------------------------------------------------------------------------
stamp="flavour=$flavour deb=$(basename "$deb") agent=$(basename "$agent_deb") ssh=$(for d in "${ssh_debs[@]}"; do basename "$d"; done | tr '\n' ' ') tpm=$(for d in "${tpm_debs[@]}"; do basename "$d"; done | tr '\n' ' ') efi=$(basename "$efi_loader_deb") size_mb=$img_mb busybox=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo unknown) cmdline=$cmdline"
inputs=("$self" "$here/rootfs" "$busybox" "$deb" "$agent_deb" "${ssh_debs[@]}" "${tpm_debs[@]}" "$efi_loader_deb")
if [ -z "${KVNODE_GUEST_FORCE:-}" ] && [ -s "$img" ] && [ -f "$img.stamp" ] &&
	[ "$(cat "$img.stamp")" = "$stamp" ] &&
	[ -z "$(find -L "${inputs[@]}" -newer "$img" -print -quit)" ]; then
	log "$img is up to date"
	exit 0
fi

log "building $img from $(basename "$deb")"
work=$(mktemp -d "${TMPDIR:-/tmp}/kvnode-guest.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- kernel and modules ----------------------------------------------------------------------------
dpkg-deb -x "$deb" "$work/k"
kver=$(find "$work/k/lib/modules" -mindepth 1 -maxdepth 1 -printf "%f\n" | head -n 1)
if [ -z "$kver" ] || [ ! -s "$work/k/boot/vmlinuz-$kver" ]; then die "$deb has no kernel"; fi
moddir="$work/k/lib/modules/$kver"

declare -A modpath=() builtin=() state=()
while IFS= read -r -d '' f; do
	n=$(basename "$f")
	n=${n%%.ko*}
	modpath[${n//-/_}]=$f
done < <(find "$moddir/kernel" -name '*.ko*' -print0)
if [ -f "$moddir/modules.builtin" ]; then
	while read -r f; do
		n=$(basename "$f" .ko)
		builtin[${n//-/_}]=1
	done < "$moddir/modules.builtin"
fi

# Modules the guest needs, in load order; each one's dependencies (from its .modinfo) are loaded
# before it. "?" marks modules that may be missing from a flavour. "name args" passes parameters.
wanted=(
	# virtio core and devices
	virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	virtio_blk failover net_failover virtio_net virtio_console
	virtio_scsi '?virtio_rng' '?virtio_balloon'
	# memory hotplug (a virtio-mem device plugged into the running guest)
	'?virtio_mem'
	# SCSI disks and cdroms (virtio-scsi, IDE on pc, AHCI on q35 if the kernel has it)
	scsi_mod sd_mod cdrom sr_mod '?libata' '?ata_piix' '?ahci'
	# filesystems: FAT boot disk, cloud-init iso9660 or vfat
	fat vfat nls_cp437 nls_ascii nls_iso8859_1 nls_utf8 isofs
	# ACPI power button as an input device, read by busybox acpid
	button evdev
	# pvpanic (libvirt <panic>): lets QEMU see a guest panic
	'?pvpanic_pci' '?pvpanic_mmio'
	# ext4 data disks (freeze tests; built into the cloud kernel)
	'?crc16' '?mbcache' '?jbd2' '?crc32c_generic' '?ext4'
	# EFI variables (firmware tests write one and read it back after a restart)
	'?efivarfs'
)
order=()
modinfo_depends() { # prints the dependencies of module file $1, one per line
	local f=$1
	case "$f" in
	*.ko) tr '\0' '\n' < "$f" ;;
	*.ko.xz) xz -dc "$f" | tr '\0' '\n' ;;
	*.ko.zst) zstd -dcq "$f" | tr '\0' '\n' ;;
	*.ko.gz) gzip -dc "$f" | tr '\0' '\n' ;;
	esac | sed -n 's/^depends=//p' | head -n 1 | tr ',' '\n'
}
resolve() { # resolve NAME OPTIONAL
	local n=${1//-/_} d
	[ "${state[$n]:-}" = resolved ] && return 0
	[ "${state[$n]:-}" = visiting ] && die "module dependency cycle at $n"
	if [ -z "${modpath[$n]:-}" ]; then
		state[$n]=resolved
		[ -n "${builtin[$n]:-}" ] && return 0
		[ "$2" = optional ] && { log "note: kernel $kver has no module $n (skipped)"; return 0; }
		die "kernel $kver has no module $n, neither loadable nor built in"
	fi
	state[$n]=visiting
	for d in $(modinfo_depends "${modpath[$n]}"); do
		resolve "$d" required
	done
	state[$n]=resolved
	order+=("$n")
}
declare -A modargs=()
for w in "${wanted[@]}"; do
	opt=required
	[ "${w#\?}" != "$w" ] && { opt=optional; w=${w#\?}; }
	resolve "${w%% *}" "$opt"
	[ "${w#* }" != "$w" ] && modargs[${w%% *}]=${w#* }
done

# --- initramfs ------------------------------------------------------------------------------------
root="$work/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,mnt,var,etc,lib/modules/kvnode,www}
cp "$busybox" "$root/bin/busybox"
while read -r applet; do
	[ -e "$root/$applet" ] || [ -L "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done < <("$busybox" --list-full)
cp -R "$here/rootfs/." "$root/"
chmod 0755 "$root/init" "$root/etc/kvnode/udhcpc.sh" "$root/etc/acpi/PWRF/00000080" "$root/sbin/shutdown" \
	"$root/sbin/firmware-mark"
: > "$root/etc/kvnode/modules"
for n in "${order[@]}"; do
	f=${modpath[$n]}
	case "$f" in
	*.ko) cp "$f" "$root/lib/modules/kvnode/$n.ko" ;;
	*.ko.xz) xz -dc "$f" > "$root/lib/modules/kvnode/$n.ko" ;;
	*.ko.zst) zstd -dcq "$f" > "$root/lib/modules/kvnode/$n.ko" ;;
	*.ko.gz) gzip -dc "$f" > "$root/lib/modules/kvnode/$n.ko" ;;
	esac
	echo "$n${modargs[$n]:+ ${modargs[$n]}}" >> "$root/etc/kvnode/modules"
done
# install_binary FILE DEST [ROOT]: FILE into the initramfs (or ROOT) at DEST, with the shared
# libraries it needs (and the loader): from the extracted packages in $work/pkgs first, else as
# the host has them (Debian's, the same release the packages were built for).
install_binary() {
	local libpath="$work/pkgs/usr/lib/x86_64-linux-gnu:$work/pkgs/lib/x86_64-linux-gnu" missing
	local root=${3:-$root}
	install -D -m 0755 "$1" "$root$2"
	missing=$(LD_LIBRARY_PATH=$libpath ldd "$1" | awk '/not found/ {print $1}')
	[ -z "$missing" ] || die "$(basename "$1") needs libraries neither its packages nor this host have: $missing"
	LD_LIBRARY_PATH=$libpath ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
		while read -r lib; do
			local dest=${lib#"$work/pkgs"}
			mkdir -p "$root$(dirname "$dest")"
			cp -L "$lib" "$root$dest"
		done
}
mkdir -p "$work/pkgs"
for d in "$agent_deb" "${ssh_debs[@]}" "${tpm_debs[@]}"; do dpkg-deb -x "$d" "$work/pkgs"; done
install_binary "$work/pkgs/usr/sbin/qemu-ga" /usr/sbin/qemu-ga
install_binary "$work/pkgs/usr/sbin/dropbear" /usr/sbin/dropbear
install_binary "$work/pkgs/usr/lib/openssh/sftp-server" /usr/lib/sftp-server
mkdir -p "$root/etc/dropbear" "$root/root/.ssh"
chmod 0700 "$root/root" "$root/root/.ssh"
# The test key pair: made once per output dir; the guest lets its holder in as root.
if [ ! -s "$out/ssh/id_ed25519" ]; then
	mkdir -p "$out/ssh"
	rm -f "$out/ssh/id_ed25519" "$out/ssh/id_ed25519.pub"
	ssh-keygen -q -t ed25519 -N "" -C kvnode-test-guest -f "$out/ssh/id_ed25519"
fi
install -m 0600 "$out/ssh/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
ln -s /run "$root/var/run"
# What the agent reports as the guest's OS (guest-get-osinfo reads it).
debian_version=$(cat /etc/debian_version 2>/dev/null || echo unknown)
cat > "$root/etc/os-release" <<EOF
PRETTY_NAME="kvnode test guest (Debian ${debian_version} kernel and busybox)"
NAME="kvnode test guest"
ID=kvnode-guest
ID_LIKE=debian
VERSION_ID="${debian_version}"
VERSION="${debian_version}"
EOF
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "/bin/sh" > "$root/etc/shells"
echo "root:x:0:" > "$root/etc/group"
echo "127.0.0.1 localhost" > "$root/etc/hosts"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) |
	gzip -n -6 > "$work/initrd.gz"

# --- tpm2-tools, unpacked by /init over the initramfs when the guest has a TPM ----------------------
tpmroot="$work/tpmroot"
install_binary "$work/pkgs/usr/bin/tpm2" /usr/bin/tpm2 "$tpmroot"
for tool in getcap createprimary evictcontrol readpublic flushcontext; do
	ln -s tpm2 "$tpmroot/usr/bin/tpm2_$tool"
done
tcti=$(find "$work/pkgs/usr/lib/x86_64-linux-gnu" -name 'libtss2-tcti-device.so.0*' -type f | head -n 1)
[ -n "$tcti" ] || die "libtss2-tcti-device0 has no libtss2-tcti-device.so.0"
install -D -m 0644 "$tcti" "$tpmroot/usr/lib/x86_64-linux-gnu/libtss2-tcti-device.so.0"
(cd "$tpmroot" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) |
	gzip -n -6 > "$work/tpm2.cpio.gz"

# --- UEFI: systemd-boot as the removable-media loader, booting the same kernel and initramfs ------
# (Debian's kernel is its own EFI program; systemd-boot hands it the initramfs and command line.
# Nothing is stored twice: the image's data stays as small as the BIOS one.)
dpkg-deb -x "$efi_loader_deb" "$work/efi"
sdboot="$work/efi/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
[ -s "$sdboot" ] || die "$(basename "$efi_loader_deb") has no systemd-bootx64.efi"
printf 'timeout 0\ndefault kvnode.conf\n' > "$work/loader.conf"
printf 'title kvnode test guest\nlinux /vmlinuz\ninitrd /initrd.gz\noptions %s\n' "$cmdline" \
	> "$work/kvnode.conf"

# --- the disk -------------------------------------------------------------------------------------
export MTOOLS_SKIP_CHECK=1
cat > "$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT kvnode
PROMPT 0
TIMEOUT 1
LABEL kvnode
  LINUX /vmlinuz
  INITRD /initrd.gz
  APPEND $cmdline
EOF
tmpimg="$out/.guest.img.tmp.$$"
rm -f "$tmpimg"
truncate -s "${img_mb}M" "$tmpimg"
mkfs.vfat -n KVNODEBOOT -i 4b564e44 "$tmpimg" >/dev/null
syslinux --install "$tmpimg"
mcopy -i "$tmpimg" "$work/k/boot/vmlinuz-$kver" ::vmlinuz
mcopy -i "$tmpimg" "$work/initrd.gz" ::initrd.gz
mcopy -i "$tmpimg" "$work/syslinux.cfg" ::syslinux.cfg
mcopy -i "$tmpimg" "$work/tpm2.cpio.gz" ::tpm2.cpio.gz
mmd -i "$tmpimg" ::EFI ::EFI/BOOT ::loader ::loader/entries
mcopy -i "$tmpimg" "$sdboot" ::EFI/BOOT/BOOTX64.EFI
mcopy -i "$tmpimg" "$work/loader.conf" ::loader/loader.conf
mcopy -i "$tmpimg" "$work/kvnode.conf" ::loader/entries/kvnode.conf

cp "$work/k/boot/vmlinuz-$kver" "$out/vmlinuz"
cp "$work/initrd.gz" "$out/initrd.gz"
echo "$cmdline" > "$out/cmdline"
{
	echo "kernel: $(basename "$deb") ($kver)"
	echo "guest agent: $(basename "$agent_deb")"
	echo "ssh: $(for d in "${ssh_debs[@]}"; do basename "$d"; done | tr '\n' ' ')"
	echo "tpm2: $(for d in "${tpm_debs[@]}"; do basename "$d"; done | tr '\n' ' ')"
	echo "uefi: $(basename "$efi_loader_deb") (EFI/BOOT/BOOTX64.EFI, loader/entries/kvnode.conf)"
	echo "cmdline: $cmdline"
	echo "modules (load order):"
	sed 's/^/  /' "$root/etc/kvnode/modules"
} > "$out/guest.manifest"
echo "$stamp" > "$img.stamp"
mv -f "$tmpimg" "$img"
log "built $img ($(du -k --apparent-size "$img" | cut -f1) KiB, kernel $kver, ${#order[@]} modules)"
